// max_pool on CUDA: the maximum over each window (see pooling.h; attributes as
// on the CPU). Padding never wins a maximum. The gradient goes to one maximum
// of each window, chosen the same way every run (cuDNN's deterministic mode).
// Where a window holds several equal maxima (e.g. zeros after a relu) the CPU
// picks the first; cuDNN does not document its pick, so the gradient may land
// on another of the tied elements (its total is the same).
#include <memory>

#include "models/layers/cuda/pooling.h"

namespace pstrain::cuda {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("max_pool", CUDNN_POOLING_MAX_DETERMINISTIC, spec, /*global=*/false);
}

[[maybe_unused]] const bool kRegistered =
    RegisterLayer("max_pool", DeviceKind::kCuda, Create, {.ints = {"kernel", "stride", "padding"}});

}  // namespace
}  // namespace pstrain::cuda
