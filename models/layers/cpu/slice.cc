// slice: a contiguous run of each example's features. Attributes "begin"
// (default 0) and "size" (required); input [N, ...] is read as [N, K] (K the
// product of the per-example dims), output [N, size] = columns [begin,
// begin + size). No parameters. How the sparse models split their one input
// (the dense features, then each table's pooled embedding) into its parts.
//
// Backward writes grad_output into those columns of the input's gradient and
// zeros everywhere else (the Layer contract: grad_inputs are overwritten; the
// model sums fan-out, e.g. two slices of the same input).
//
// Layouts: output plain. A blocked input is converted to plain row-major
// first, and its gradient back. Plain loops (a copy per example): memory-bound
// and small next to the dense layers around it.
//
// CPU only: the sparse models train on CPU workers. On cuda the type is
// registered as unavailable, so a model using it there is refused with that
// reason (naming the layer) rather than as an unknown type.
#include <algorithm>
#include <cstring>
#include <vector>

#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

class Slice final : public Layer {
 public:
  explicit Slice(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupSlice(spec_, input_shapes));
    return setup_.output;
  }

  // Backward reads shapes only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    Tensor in = inputs[0];
    if (!in.is_plain()) {
      in = Tensor(inputs[0].shape());
      ctx.Convert(inputs[0], in);
    }
    const int64_t n = in.dim(0), k = setup_.in_features, size = setup_.size;
    const float* src = in.data() + setup_.begin;
    float* dst = output.data();
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * size, src + i * k, size * sizeof(float));
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    const Tensor grad = grad_inputs[0].is_plain() ? grad_inputs[0] : Tensor(inputs[0].shape());
    const int64_t n = grad.dim(0), k = setup_.in_features, size = setup_.size, begin = setup_.begin;
    const float* src = grad_output.data();
    float* dst = grad.data();
    for (int64_t i = 0; i < n; ++i) {
      float* row = dst + i * k;
      std::fill(row, row + begin, 0.0f);
      std::memcpy(row + begin, src + i * size, size * sizeof(float));
      std::fill(row + begin + size, row + k, 0.0f);
    }
    if (!grad_inputs[0].is_plain()) ctx.Convert(grad, grad_inputs[0]);
  }

 private:
  const LayerSpec spec_;
  SliceSetup setup_;
};

PSTRAIN_REGISTER_LAYER("slice", DeviceKind::kCpu, Slice, {.ints = {"begin", "size"}, .floats = {}});
[[maybe_unused]] const bool kNoCudaSlice = RegisterUnavailableLayer(
    "slice", DeviceKind::kCuda,
    "slice is implemented on CPUs only (the sparse models, dlrm and wide_deep, train on CPU workers): use device: cpu");

}  // namespace
}  // namespace pstrain::cpu
