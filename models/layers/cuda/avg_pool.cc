// avg_pool on CUDA: the mean over each window (see pooling.h; attributes as on
// the CPU), excluding padding as the CPU does: a window overlapping the
// padding averages only its elements inside the input.
#include <memory>

#include "models/layers/cuda/pooling.h"

namespace pstrain::cuda {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("avg_pool", CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, spec, /*global=*/false);
}

[[maybe_unused]] const bool kRegistered =
    RegisterLayer("avg_pool", DeviceKind::kCuda, Create, {.ints = {"kernel", "stride", "padding"}});

}  // namespace
}  // namespace pstrain::cuda
