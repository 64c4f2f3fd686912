// lrn on CUDA: local response normalisation across channels on cuDNN, the
// CPU layer's function exactly:
//   y[c] = x[c] / (k + alpha / size * sum_{c' in window(c)} x[c']^2)^beta,
// the window being channels c - (size-1)/2 .. c + (size-1)/2 (integer
// division; clipped at the ends). That is `size` channels for odd sizes and
// size - 1 for even ones (oneDNN's definition), while alpha is always
// divided by `size`.
//
// cuDNN's window is always its n channels (one more ahead than behind for
// even n) and it divides its alpha by n; so it is given the odd width
// n = 2 * ((size-1)/2) + 1 and alpha * n / size, which computes the formula
// above for every size (n = size, alpha unchanged, for odd sizes).
//
// Attributes: "size" (default 5), "alpha" (1e-4), "beta" (0.75), "k" (1.0),
// validated as on the CPU; cuDNN further needs n <= 16, k >= 1e-5 and
// beta >= 0.01 (InvalidArgument otherwise). Input [C, H, W]; output alike.
// No parameters.
// The output is plain float32; 16-bit channels-last inputs (HalfNhwcLayout)
// are converted, and their gradients back (plain_fallback.h).
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cuda/cuda_context.h"
#include "models/layers/cuda/cudnn_util.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class Lrn final : public Layer {
 public:
  explicit Lrn(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupLrn(spec_, input_shapes));
    if (WindowWidth() > CUDNN_LRN_MAX_N) {
      return absl::InvalidArgumentError(
          absl::StrCat("lrn on cuda spans at most ", CUDNN_LRN_MAX_N, " channels (cuDNN), got size ", setup_.size));
    }
    if (!(setup_.k >= CUDNN_LRN_MIN_K) || !(setup_.beta >= CUDNN_LRN_MIN_BETA)) {
      return absl::InvalidArgumentError(absl::StrCat("lrn on cuda needs k >= ", CUDNN_LRN_MIN_K,
                                                     " and beta >= ", CUDNN_LRN_MIN_BETA, " (cuDNN), got k ", setup_.k,
                                                     " beta ", setup_.beta));
    }
    return setup_.shape;
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    CHECK(output.shape() == inputs[0].shape()) << "lrn output " << ShapeToString(output.shape());
    const TensorDescriptor& data = DescriptorFor(inputs[0].shape());
    PSTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelForward(ctx.cudnn(), lrn_->get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne,
                                                    data.get(), DevicePtr(PlainActivation(ctx, inputs[0])), &kZero,
                                                    data.get(), DevicePtr(output)));
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CudaContext& ctx = AsCuda(dctx);
    CHECK(grad_output.shape() == inputs[0].shape() && grad_inputs[0].shape() == inputs[0].shape())
        << "lrn gradient shapes " << ShapeToString(grad_output.shape()) << ", "
        << ShapeToString(grad_inputs[0].shape());
    const TensorDescriptor& data = DescriptorFor(inputs[0].shape());
    PlainGradient dx(ctx, grad_inputs[0]);
    PSTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(ctx.cudnn(), lrn_->get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne,
                                                     data.get(), DevicePtr(output), data.get(), DevicePtr(grad_output),
                                                     data.get(), DevicePtr(PlainActivation(ctx, inputs[0])), &kZero,
                                                     data.get(), DevicePtr(dx.get())));
    dx.Store();
  }

 private:
  // The channels a window spans: size rounded down to odd (see the top).
  int64_t WindowWidth() const { return 2 * ((setup_.size - 1) / 2) + 1; }

  // Input, output and both gradients share one descriptor. The LRN
  // descriptor is made with the first.
  const TensorDescriptor& DescriptorFor(const Shape& input) {
    auto it = cache_.find(input);
    if (it != cache_.end()) return it->second;
    CHECK(input == Batched(input.at(0), setup_.shape))
        << "lrn set up for " << ShapeToString(setup_.shape) << " got input " << ShapeToString(input);
    if (!lrn_) {
      lrn_.emplace();
      const int64_t width = WindowWidth();
      const double alpha =
          static_cast<double>(setup_.alpha) * static_cast<double>(width) / static_cast<double>(setup_.size);
      PSTRAIN_CUDNN_CHECK(
          cudnnSetLRNDescriptor(lrn_->get(), static_cast<unsigned>(width), alpha, setup_.beta, setup_.k));
    }
    return cache_.emplace(input, NchwDescriptor(input)).first->second;
  }

  const LayerSpec spec_;
  LrnSetup setup_;  // attributes and per-example shape
  std::optional<LrnDescriptor> lrn_;
  std::map<Shape, TensorDescriptor> cache_;  // by batched input shape
};

PSTRAIN_REGISTER_LAYER("lrn", DeviceKind::kCuda, Lrn, {.ints = {"size"}, .floats = {"alpha", "beta", "k"}});

}  // namespace
}  // namespace pstrain::cuda
