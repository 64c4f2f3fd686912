// CreateNcclStrategy for builds without CUDA (nccl_allreduce.cc otherwise).
#include "worker/strategies/nccl_strategy.h"

namespace pstrain {

#ifndef PSTRAIN_WITH_CUDA
absl::StatusOr<std::unique_ptr<Strategy>> CreateNcclStrategy(const StrategyContext& context, NcclScope scope) {
  return absl::UnimplementedError("NCCL strategies: this pstrain was built without CUDA (PSTRAIN_WITH_CUDA=OFF)");
}
#endif

}  // namespace pstrain
