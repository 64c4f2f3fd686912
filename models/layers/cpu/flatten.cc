// flatten: [N, d1, d2, ...] -> [N, d1*d2*...] in row-major (C, H, W) order.
// No attributes, no parameters. The output is plain and its own buffer (as
// the Layer contract asks); a blocked input is reordered into it, which is
// where a blocked conv/pool chain hands over to dense layers.
#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

class Flatten final : public Layer {
 public:
  explicit Flatten(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupFlatten(input_shapes); }

  // Backward reads shapes only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    if (inputs[0].is_plain()) {
      output.CopyFrom(inputs[0]);
    } else {
      // Same buffer, viewed with the input's dims.
      ctx.Convert(inputs[0], Tensor(inputs[0].shape(), DType::kFloat32, output.buffer()));
    }
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    if (grad_inputs[0].is_plain()) {
      grad_inputs[0].CopyFrom(grad_output);
    } else {
      ctx.Convert(Tensor(inputs[0].shape(), DType::kFloat32, grad_output.buffer()), grad_inputs[0]);
    }
  }
};

PSTRAIN_REGISTER_LAYER("flatten", DeviceKind::kCpu, Flatten, {});

}  // namespace
}  // namespace pstrain::cpu
