// max_pool: the maximum over each window (see pooling.h for attributes).
// The gradient goes to the (first) maximum of each window.
#include "models/layers/cpu/pooling.h"

namespace pstrain::cpu {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("max_pool", dnnl::algorithm::pooling_max, spec, /*global=*/false);
}

[[maybe_unused]] const bool kRegistered =
    RegisterLayer("max_pool", DeviceKind::kCpu, Create, {.ints = {"kernel", "stride", "padding"}});

}  // namespace
}  // namespace pstrain::cpu
