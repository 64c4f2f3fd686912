// add on CUDA: y = x_0 + x_1 + ..., elementwise over inputs of one shape.
// Same contract as the CPU layer (cpu/add.cc): 2 or more inputs, no
// attributes, no parameters; every input's gradient is a copy of
// grad_output, so the model may move the gradients itself
// (PassesGradientThrough()). Inputs in one layout give an output in it
// (16-bit channels-last activations: each partial sum in float32, rounded
// to 16 bits); inputs in different layouts are summed in plain float32.
//
// Fusion: as on the CPU, with exactly two inputs it accepts a following
// relu (Layer::Fuse) and computes relu(x_0 + x_1) in one kernel
// (add_relu.h); backward then gives relu's gradient, y > 0 ? dy : 0, to both
// inputs in one kernel, and no longer passes its gradient through.
#include <vector>

#include "device/cuda/add_relu.h"
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

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    num_inputs_ = input_shapes.size();
    return SetupAdd(input_shapes);
  }

  bool Fuse(const LayerSpec& next) override {
    if (next.type != "relu" || num_inputs_ != 2) return false;
    fuse_relu_ = true;
    return true;
  }

  // Backward reads nothing; with a fused relu, the output (where it is 0).
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = fuse_relu_}; }

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
    if (fuse_relu_) return ForwardWithRelu(ctx, inputs, output);
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

  bool PassesGradientThrough() const override { return !fuse_relu_; }

  // Each input's gradient is grad_output (masked by a fused relu), in that
  // input's layout.
  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    if (fuse_relu_) return BackwardWithRelu(ctx, output, grad_output, grad_inputs);
    for (const Tensor& g : grad_inputs) {
      if (g.empty()) continue;
      CHECK(g.shape() == grad_output.shape()) << "add: input gradient " << ShapeToString(g.shape());
      ctx.Convert(grad_output, g);
    }
  }

 private:
  void ForwardWithRelu(CudaContext& ctx, absl::Span<const Tensor> inputs, Tensor& output) {
    const int64_t n = output.num_elements();
    if (const HalfNhwcLayout* half = AsHalfNhwc(output.layout())) {
      AddReluHalf(ActivationPtr(inputs[0]), ActivationPtr(inputs[1]), ActivationPtr(output), n, half->type(),
                  ctx.stream());
      return;
    }
    AddRelu(DevicePtr(PlainActivation(ctx, inputs[0])), DevicePtr(PlainActivation(ctx, inputs[1])), DevicePtr(output),
            n, ctx.stream());
  }

  // One kernel writes the masked gradient into up to two input gradients
  // laid out as the output (or into scratch when none is); any other is
  // converted from the first.
  void BackwardWithRelu(CudaContext& ctx, const Tensor& output, const Tensor& grad_output,
                        absl::Span<Tensor> grad_inputs) {
    std::vector<const Tensor*> direct, converted;
    for (const Tensor& g : grad_inputs) {
      if (g.empty()) continue;
      CHECK(g.shape() == grad_output.shape()) << "add: input gradient " << ShapeToString(g.shape());
      (SameLayout(g.layout(), output.layout()) ? direct : converted).push_back(&g);
    }
    if (direct.empty() && converted.empty()) return;
    if (direct.empty()) {
      if (masked_.shape() != output.shape() || !SameLayout(masked_.layout(), output.layout()))
        masked_ = ctx.Allocate(output.shape(), output.layout());
      direct.push_back(&masked_);
    }
    void* dx1 = direct.size() > 1 ? ActivationPtr(*direct[1]) : nullptr;
    const int64_t n = output.num_elements();
    if (const HalfNhwcLayout* half = AsHalfNhwc(output.layout())) {
      ReluGradientHalf(ActivationPtr(output), ActivationPtr(grad_output), ActivationPtr(*direct[0]), dx1, n,
                       half->type(), ctx.stream());
    } else {
      ReluGradient(DevicePtr(output), DevicePtr(grad_output), DevicePtr(*direct[0]), static_cast<float*>(dx1), n,
                   ctx.stream());
    }
    for (const Tensor* g : converted) ctx.Convert(*direct[0], *g);
  }

  size_t num_inputs_ = 0;
  bool fuse_relu_ = false;
  Tensor masked_;  // a fused relu's gradient when no input's is laid out as the output
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCuda, AddLayer, {});

}  // namespace
}  // namespace pstrain::cuda
