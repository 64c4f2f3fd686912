// relu on CUDA: y = max(x, 0), elementwise, any shape, on cuDNN's activation.
// No attributes, no parameters. The gradient at x == 0 is 0; NaNs propagate,
// as on the CPU. Keeps its input's layout: 16-bit channels-last activations
// (HalfNhwcLayout) stay so, elementwise.
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "device/cuda/cuda_context.h"
#include "models/layers/cuda/cudnn_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class Relu final : public Layer {
 public:
  explicit Relu(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupRelu(input_shapes); }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return inputs[0].layout();
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    CHECK(output.shape() == inputs[0].shape()) << "relu output " << ShapeToString(output.shape());
    const TensorDescriptor& data = DescriptorFor(inputs[0]);
    PSTRAIN_CUDNN_CHECK(cudnnActivationForward(ctx.cudnn(), Activation(), &kOne, data.get(), ActivationPtr(inputs[0]),
                                               &kZero, data.get(), ActivationPtr(output)));
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CudaContext& ctx = AsCuda(dctx);
    CHECK(grad_output.shape() == inputs[0].shape() && grad_inputs[0].shape() == inputs[0].shape())
        << "relu gradient shapes " << ShapeToString(grad_output.shape()) << ", "
        << ShapeToString(grad_inputs[0].shape());
    const TensorDescriptor& data = DescriptorFor(inputs[0]);
    PSTRAIN_CUDNN_CHECK(cudnnActivationBackward(
        ctx.cudnn(), Activation(), &kOne, data.get(), ActivationPtr(output), data.get(), ActivationPtr(grad_output),
        data.get(), ActivationPtr(inputs[0]), &kZero, data.get(), ActivationPtr(grad_inputs[0])));
  }

 private:
  cudnnActivationDescriptor_t Activation() {
    if (!relu_) relu_.emplace(ReluDescriptor());
    return relu_->get();
  }

  // Input, output and both gradients share one descriptor (elementwise:
  // the element type matters, the arrangement does not).
  const TensorDescriptor& DescriptorFor(const Tensor& input) {
    const std::pair<Shape, cudnnDataType_t> key(input.shape(), ElementType(input));
    auto it = cache_.find(key);
    if (it == cache_.end()) it = cache_.emplace(key, FlatDescriptor(key.first, key.second)).first;
    return it->second;
  }

  std::optional<ActivationDescriptor> relu_;                             // made on first use
  std::map<std::pair<Shape, cudnnDataType_t>, TensorDescriptor> cache_;  // by batched shape and type
};

PSTRAIN_REGISTER_LAYER("relu", DeviceKind::kCuda, Relu, {});

}  // namespace
}  // namespace pstrain::cuda
