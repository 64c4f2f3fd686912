// replicated: the devices of ONE worker each own a full copy of the variables;
// after backward, gradients are all-reduced across the replicas
// (all_reduce_spec: pscpu = summed on the host, none = summed on one replica
// chosen round-robin per variable; nccl on GPUs: NCCL all-reduce of the
// device gradients, worker/strategies/nccl_allreduce.cc; on emulated
// devices in an emulated host, a ring over its modelled links,
// worker/local_reduce_ring.cc), and every replica applies the same update.
// No parameter servers; one worker.
#include "absl/strings/str_cat.h"
#include "worker/emulated_device.h"
#include "worker/local_reduce.h"
#include "worker/strategies/local_replicas.h"
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {
namespace {

constexpr char kNccl[] = "nccl";

std::vector<std::string> Specs() {
  std::vector<std::string> specs = {""};  // the default: pscpu
  for (const std::string& s : LocalReduceSpecs()) specs.push_back(s);
  specs.push_back(kNccl);
  return specs;
}

// Emulated devices in an emulated host: nccl is the ring over the
// emulated interconnect (local_reduce_ring.cc).
constexpr char kEmulatedRing[] = "emulated_ring";

StrategyNeeds Needs(const ExperimentConfig& c) {
  StrategyNeeds needs;
  needs.max_workers = 1;
  if (EmulatedTopology(c)) {
    // nccl and none move gradients between the devices themselves; pscpu
    // through the host, as on GPUs with host mirrors.
    needs.host_mirrors = c.all_reduce_spec() != kNccl && c.all_reduce_spec() != "none";
    return needs;
  }
  if (c.all_reduce_spec() == kNccl) {
    needs.devices = {"gpu"};
    needs.host_mirrors = false;
    needs.unscales_on_device = true;
    needs.collective = "nccl";
  }
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  const std::string& spec = context.config->all_reduce_spec();
  const bool emulated = EmulatedTopology(*context.config);
  if (spec == kNccl && !emulated) return CreateNcclStrategy(context, NcclScope::kOneWorker);
  const std::string reduce = spec.empty() ? "pscpu" : spec == kNccl ? kEmulatedRing : spec;
  return LocalReplicasStrategy::Create(
      context, reduce,
      absl::StrCat("replicated (all_reduce_spec ", reduce, ", ", context.replicas->size(), " replicas)"));
}

const bool kRegistered = StrategyRegistry().Register(
    "replicated", {
                      .summary = "the devices of one worker each hold a copy and all-reduce their gradients",
                      .all_reduce_specs = Specs(),
                      .local_parameter_device_gpu = false,
                      .reads_collective = false,
                      .compressions = {},
                      .needs = Needs,
                      .check = nullptr,
                      .create = Create,
                      .tables_beside = true,
                  });

}  // namespace
}  // namespace pstrain
