// UsesNccl, and CreateNcclStrategy for builds without CUDA.
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {

bool UsesNccl(const ExperimentConfig& config) {
  if (config.device() != "gpu") return false;
  return config.variable_update() == "allreduce" ||
         (config.variable_update() == "replicated" && config.all_reduce_spec() == "nccl");
}

#ifndef PSTRAIN_WITH_CUDA
absl::StatusOr<std::unique_ptr<Strategy>> CreateNcclStrategy(const StrategyContext& context) {
  return absl::UnimplementedError("NCCL strategies: this pstrain was built without CUDA (PSTRAIN_WITH_CUDA=OFF)");
}
#endif

}  // namespace pstrain
