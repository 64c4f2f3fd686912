// add on CUDA: y = x_0 + x_1 + ..., elementwise over inputs of one shape.
// Same contract as the CPU layer (cpu/add.cc): 2 or more inputs, no
// attributes, no parameters; every input's gradient is a copy of
// grad_output, so the model may move the gradients itself
// (PassesGradientThrough()).
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
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

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const int64_t n = output.num_elements();
    for (const Tensor& in : inputs) CHECK(in.shape() == output.shape()) << "add: input " << ShapeToString(in.shape());
    float* y = DevicePtr(output);
    Add(DevicePtr(inputs[0]), DevicePtr(inputs[1]), y, n, ctx.stream());
    for (size_t i = 2; i < inputs.size(); ++i) AddInto(y, DevicePtr(inputs[i]), n, ctx.stream());
  }

  bool PassesGradientThrough() const override { return true; }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    for (const Tensor& g : grad_inputs) {
      if (g.empty()) continue;
      CHECK(g.shape() == grad_output.shape()) << "add: input gradient " << ShapeToString(g.shape());
      PSTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(DevicePtr(g), DevicePtr(grad_output), g.num_bytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
    }
  }
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCuda, AddLayer, {});

}  // namespace
}  // namespace pstrain::cuda
