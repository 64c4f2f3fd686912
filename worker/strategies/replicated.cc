// replicated: the devices of ONE worker each own a full copy of the variables;
// after backward, gradients are all-reduced across the replicas
// (all_reduce_spec: pscpu = summed on the host, none = summed on one replica
// chosen round-robin per variable; nccl on GPUs: worker/strategies/
// nccl_allreduce.cc), and every replica applies the same update.
// No parameter servers. Across workers use distributed_replicated or allreduce.
#include "absl/strings/str_cat.h"
#include "worker/strategies/local_replicas.h"
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {
namespace {

const bool kRegistered =
    RegisterStrategy("replicated", [](const StrategyContext& context) -> absl::StatusOr<std::unique_ptr<Strategy>> {
      const std::string message =
          "variable_update replicated synchronises the devices of one worker; across workers use "
          "distributed_replicated or allreduce";
      if (context.num_workers != 1) return absl::InvalidArgumentError(message);
      if (UsesNccl(*context.config)) return CreateNcclStrategy(context);
      const std::string spec = context.config->all_reduce_spec().empty() ? "pscpu" : context.config->all_reduce_spec();
      return LocalReplicasStrategy::Create(
          context, spec,
          absl::StrCat("replicated (all_reduce_spec ", spec, ", ", context.replicas->size(), " replicas)"), message);
    });

}  // namespace
}  // namespace pstrain
