// global_avg_pool: the mean over all of H x W per channel. No attributes, no
// parameters. Input [C, H, W] -> output [C, 1, 1] (flatten or dense next).
#include "models/layers/cpu/pooling.h"

namespace pstrain::cpu {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("global_avg_pool", dnnl::algorithm::pooling_avg_exclude_padding, spec,
                                   /*global=*/true);
}

[[maybe_unused]] const bool kRegistered = RegisterLayer("global_avg_pool", DeviceKind::kCpu, Create, {});

}  // namespace
}  // namespace pstrain::cpu
