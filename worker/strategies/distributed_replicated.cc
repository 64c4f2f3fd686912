// distributed_replicated: every replica keeps a full copy; the worker first
// all-reduces its replicas' gradients (all_reduce_spec), then pushes ONE mean
// gradient to the parameter servers, which aggregate across workers; the new
// values are pulled back into every replica.
#include "worker/local_reduce.h"
#include "worker/strategies/parameter_server.h"

namespace pstrain {
namespace {

std::vector<std::string> Specs() {
  std::vector<std::string> specs = {""};  // the default: pscpu
  for (const std::string& s : LocalReduceSpecs()) specs.push_back(s);
  return specs;
}

StrategyNeeds Needs(const ExperimentConfig&) {
  StrategyNeeds needs;
  needs.parameter_servers = true;
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  const std::string& spec = context.config->all_reduce_spec();
  return ParameterServerStrategy::Create(context, "distributed_replicated", spec.empty() ? "pscpu" : spec);
}

const bool kRegistered = StrategyRegistry().Register(
    "distributed_replicated",
    {
        .summary = "each worker all-reduces its devices' gradients, then pushes one mean gradient to parameter servers",
        .all_reduce_specs = Specs(),
        .local_parameter_device_gpu = false,
        .compressions = {"fp16", "bf16", "topk"},
        .needs = Needs,
        .check = nullptr,
        .create = Create,
    });

}  // namespace
}  // namespace pstrain
