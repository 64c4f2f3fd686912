// add on CUDA: y = x_0 + x_1 + ..., elementwise over inputs of one shape.
// Same contract as the CPU layer (cpu/add.cc): 2 or more inputs, no
// attributes, no parameters; every input's gradient is a copy of
// grad_output, so the model may move the gradients itself
// (PassesGradientThrough()). Inputs in one layout give an output in it
// (16-bit channels-last activations: each partial sum in float32, rounded
// to 16 bits); inputs in different layouts are summed in plain float32.
#include <vector>

#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
#include "device/cuda/half_nhwc.h"
#include "device/cuda/half_nhwc_layout.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

// Named apart from elementwise.h's Add().
class AddLayer final : public Layer {
 public:
  explicit AddLayer(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupAdd(input_shapes); }

  // Backward reads nothing.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  // The inputs' layout when they share one; plain otherwise.
  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    for (const Tensor& in : inputs) {
      if (!SameLayout(in.layout(), inputs[0].layout())) return nullptr;
    }
    return inputs[0].layout();
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const int64_t n = output.num_elements();
    for (const Tensor& in : inputs) CHECK(in.shape() == output.shape()) << "add: input " << ShapeToString(in.shape());
    if (const HalfNhwcLayout* half = AsHalfNhwc(output.layout())) {
      void* y = ActivationPtr(output);
      AddHalf(ActivationPtr(inputs[0]), ActivationPtr(inputs[1]), y, n, half->type(), ctx.stream());
      for (size_t i = 2; i < inputs.size(); ++i) AddHalf(y, ActivationPtr(inputs[i]), y, n, half->type(), ctx.stream());
      return;
    }
    float* y = DevicePtr(output);
    Add(DevicePtr(PlainActivation(ctx, inputs[0])), DevicePtr(PlainActivation(ctx, inputs[1])), y, n, ctx.stream());
    for (size_t i = 2; i < inputs.size(); ++i) AddInto(y, DevicePtr(PlainActivation(ctx, inputs[i])), n, ctx.stream());
  }

  bool PassesGradientThrough() const override { return true; }

  // Each input's gradient is grad_output, in that input's layout.
  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    for (const Tensor& g : grad_inputs) {
      if (g.empty()) continue;
      CHECK(g.shape() == grad_output.shape()) << "add: input gradient " << ShapeToString(g.shape());
      ctx.Convert(grad_output, g);
    }
  }
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCuda, AddLayer, {});

}  // namespace
}  // namespace pstrain::cuda
