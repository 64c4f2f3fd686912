// avg_pool: the mean over each window (see pooling.h for attributes), with
// exclude-padding semantics: a window overlapping the padding averages only
// its elements inside the input (TensorFlow's "SAME" pooling, Caffe's
// behaviour differs). Without padding the two agree.
#include "models/layers/cpu/pooling.h"

namespace pstrain::cpu {
namespace {

std::unique_ptr<Layer> Create(const LayerSpec& spec) {
  return std::make_unique<Pooling>("avg_pool", dnnl::algorithm::pooling_avg_exclude_padding, spec, /*global=*/false);
}

[[maybe_unused]] const bool kRegistered =
    RegisterLayer("avg_pool", DeviceKind::kCpu, Create, {.ints = {"kernel", "stride", "padding"}});

}  // namespace
}  // namespace pstrain::cpu
