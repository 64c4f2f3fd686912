// flatten: [N, d1, d2, ...] -> [N, d1*d2*...]. No attributes, no parameters.
// A copy (the output is its own buffer, as the Layer contract asks).
#include "absl/strings/str_cat.h"
#include "models/layers/layer.h"

namespace pstrain::cpu {
namespace {

class Flatten final : public Layer {
 public:
  explicit Flatten(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("flatten takes 1 input, got ", input_shapes.size()));
    }
    return Shape{NumElements(input_shapes[0])};
  }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    output.CopyFrom(inputs[0]);
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (!grad_inputs[0].empty()) grad_inputs[0].CopyFrom(grad_output);
  }
};

PSTRAIN_REGISTER_LAYER("flatten", DeviceKind::kCpu, Flatten);

}  // namespace
}  // namespace pstrain::cpu
