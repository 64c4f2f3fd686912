// global_avg_pool on CUDA: the mean over all of H x W per channel. No
// attributes, no parameters. Input [C, H, W] -> output [C, 1, 1].
#include <memory>

#include "models/layers/cuda/pooling.h"

namespace pstrain::cuda {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("global_avg_pool", CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, spec,
                                   /*global=*/true);
}

[[maybe_unused]] const bool kRegistered = RegisterLayer("global_avg_pool", DeviceKind::kCuda, Create, {});

}  // namespace
}  // namespace pstrain::cuda
