// independent: no synchronisation at all. Every replica trains its own copy
// on its own data and applies its own gradients: the throughput ceiling the
// synchronising strategies are compared against. The chief evaluates its
// replica 0. Only one worker (several would have no way to report).
#include "absl/strings/str_cat.h"
#include "worker/strategies/local_replicas.h"

namespace pstrain {
namespace {

StrategyNeeds Needs(const ExperimentConfig&) {
  StrategyNeeds needs;
  needs.max_workers = 1;
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  return LocalReplicasStrategy::Create(
      context, std::nullopt, absl::StrCat("independent (", context.replicas->size(), " replicas, no synchronisation)"));
}

const bool kRegistered = StrategyRegistry().Register(
    "independent", {
                       .summary = "no synchronisation: every device of one worker trains its own copy",
                       .all_reduce_specs = {},
                       .local_parameter_device_gpu = false,
                       .needs = Needs,
                       .check = nullptr,
                       .create = Create,
                   });

}  // namespace
}  // namespace pstrain
