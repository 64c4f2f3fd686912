#include "models/layers/cuda/pooling.h"

#include <utility>

#include "device/cuda/cuda_context.h"
#include "device/cuda/half_nhwc_layout.h"

namespace pstrain::cuda {

Pooling::Pooling(std::string type, cudnnPoolingMode_t mode, const LayerSpec& spec, bool global)
    : type_(std::move(type)), mode_(mode), spec_(spec), global_(global) {}

absl::StatusOr<Shape> Pooling::Setup(const std::vector<Shape>& input_shapes) {
  PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupPooling(spec_, type_, input_shapes, global_));
  return setup_.output;
}

TensorLayoutPtr Pooling::OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) {
  return OutputLayoutFor(inputs[0]);
}

TensorLayoutPtr Pooling::OutputLayoutFor(const Tensor& input) const {
  const HalfNhwcLayout* half = AsHalfNhwc(input.layout());
  return half ? MakeHalfNhwcLayout(Batched(input.dim(0), setup_.output), half->type()) : nullptr;
}

Pooling::Descriptors& Pooling::DescriptorsFor(const Tensor& in) {
  const Shape& input = in.shape();
  auto [it, inserted] = cache_.try_emplace({input, ElementType(in)});
  if (!inserted) return it->second;
  CHECK(input == Batched(input.at(0), setup_.input))
      << type_ << " set up for " << ShapeToString(setup_.input) << " got input " << ShapeToString(input);
  if (!pooling_) {
    pooling_.emplace();
    const Window2d& w = setup_.window;
    // NaNs propagate through max pooling rather than vanish.
    PSTRAIN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(
        pooling_->get(), mode_, CUDNN_PROPAGATE_NAN, CudnnDim(w.kh, "kernel"), CudnnDim(w.kw, "kernel"),
        CudnnDim(w.ph, "padding"), CudnnDim(w.pw, "padding"), CudnnDim(w.sh, "stride"), CudnnDim(w.sw, "stride")));
  }
  Descriptors& d = it->second;
  d.input = ActivationDescriptor4d(in);
  const Shape output = Batched(input[0], setup_.output);
  d.output = ActivationDescriptor4d(output, OutputLayoutFor(in));
  int n = 0, c = 0, h = 0, w = 0;
  PSTRAIN_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pooling_->get(), d.input.get(), &n, &c, &h, &w));
  CHECK(Shape({n, c, h, w}) == output) << type_ << ": cuDNN's output [" << n << "," << c << "," << h << "," << w
                                       << "] differs from " << ShapeToString(output);
  return d;
}

void Pooling::Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) {
  CudaContext& ctx = AsCuda(dctx);
  const Descriptors& d = DescriptorsFor(inputs[0]);
  CHECK(output.shape() == Batched(inputs[0].dim(0), setup_.output))
      << type_ << " output " << ShapeToString(output.shape());
  PSTRAIN_CUDNN_CHECK(cudnnPoolingForward(ctx.cudnn(), pooling_->get(), &kOne, d.input.get(), ActivationPtr(inputs[0]),
                                          &kZero, d.output.get(), ActivationPtr(output)));
}

void Pooling::Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output,
                       const Tensor& grad_output, absl::Span<Tensor> grad_inputs) {
  if (grad_inputs[0].empty()) return;
  CudaContext& ctx = AsCuda(dctx);
  const Descriptors& d = DescriptorsFor(inputs[0]);
  CHECK(grad_output.shape() == output.shape() && grad_inputs[0].shape() == inputs[0].shape())
      << type_ << " gradient shapes " << ShapeToString(grad_output.shape()) << ", "
      << ShapeToString(grad_inputs[0].shape());
  // Max pooling finds each window's maximum again from the input and output.
  PSTRAIN_CUDNN_CHECK(cudnnPoolingBackward(ctx.cudnn(), pooling_->get(), &kOne, d.output.get(), ActivationPtr(output),
                                           d.output.get(), ActivationPtr(grad_output), d.input.get(),
                                           ActivationPtr(inputs[0]), &kZero, d.input.get(),
                                           ActivationPtr(grad_inputs[0])));
}

}  // namespace pstrain::cuda
