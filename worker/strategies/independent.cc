// independent: no synchronisation at all. Every replica trains its own copy
// on its own data and applies its own gradients: the throughput ceiling the
// synchronising strategies are compared against. The chief evaluates its
// replica 0. Only one worker (several would have no way to report).
// On GPUs the variables, gradients and optimizer stay on the devices (the
// device strategy of nccl_strategy.h with no collective), so the ceiling is
// not lowered by host round trips the synchronising strategies may not pay;
// with loss scaling the host mirrors serve, as the host unscales.
#include "absl/strings/str_cat.h"
#include "optim/loss_scaler.h"
#include "worker/emulated_device.h"
#include "worker/strategies/local_replicas.h"
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {
namespace {

bool OnDevice(const ExperimentConfig& c) { return c.device() == "gpu" && !ScalesLoss(c.loss_scaling()); }

StrategyNeeds Needs(const ExperimentConfig& c) {
  StrategyNeeds needs;
  needs.max_workers = 1;
  // Emulated devices in an emulated host keep their variables too: nothing
  // crosses the interconnect.
  needs.host_mirrors = !OnDevice(c) && !EmulatedTopology(c);
  return needs;
}

absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
  if (OnDevice(*context.config)) return CreateNcclStrategy(context, NcclScope::kNone);
  return LocalReplicasStrategy::Create(
      context, std::nullopt, absl::StrCat("independent (", context.replicas->size(), " replicas, no synchronisation)"));
}

const bool kRegistered = StrategyRegistry().Register(
    "independent", {
                       .summary = "no synchronisation: every device of one worker trains its own copy",
                       .all_reduce_specs = {},
                       .local_parameter_device_gpu = false,
                       .reads_collective = false,
                       .compressions = {},
                       .needs = Needs,
                       .check = nullptr,
                       .create = Create,
                   });

}  // namespace
}  // namespace pstrain
