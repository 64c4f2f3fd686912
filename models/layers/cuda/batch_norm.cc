// batch_norm on CUDA: batch normalisation over the channel axis on cuDNN,
// y = gamma * (x - mean) / sqrt(var + epsilon) + beta; the CPU layer's
// attributes, validation, parameters and statistics (see cpu/batch_norm.cc):
//   "epsilon" (default 1e-3), "momentum" (default 0.9). Input [C, H, W]
//   (cuDNN's spatial mode: statistics over N, H, W) or [C] (per-activation
//   mode on N x C x 1 x 1: statistics over N). Parameters "gamma" (ones) and
//   "beta" (zeros), [C].
//
// Training normalises with the batch's statistics (biased variance) and
// updates the running averages, running = momentum * running + (1 - momentum)
// * batch, with the running variance Bessel-corrected (m / (m - 1), m = N*H*W):
// cuDNN's exponentialAverageFactor is 1 - momentum and cuDNN corrects the
// variance itself. With m == 1 there is nothing to correct and the CPU adds
// the batch variance, 0, as is; so does this layer. Inference uses the
// running averages (initially mean 0, variance 1), layer state on the GPU,
// not Parameters. Backward uses the mean and inverse standard deviation the
// last training Forward() saved.
//
// Fusion: accepts a following relu (Layer::Fuse), computing relu(bn(x)) in
// both modes: the output is relu'd in place, and Backward() zeroes
// grad_output where that output is 0 before the batch norm's own backward.
// This saves the relu's buffers, not passes over memory (the relu is still a
// cuDNN call of its own).
//
// Layouts: the output is laid out as the input. 16-bit channels-last inputs
// (HalfNhwcLayout) are normalised as they are, with gamma, beta and the
// statistics in float32 (cuDNN's mixed-precision batch norm).
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
#include "models/layers/cuda/cudnn_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupBatchNorm(spec_, input_shapes, &parameters_));
    mode_ = setup_.shape.size() == 3 ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION;
    return setup_.shape;
  }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return inputs[0].layout();
  }

  bool Fuse(const LayerSpec& next) override {
    if (next.type != "relu") return false;
    fuse_relu_ = true;
    return true;
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const Descriptors& d = DescriptorsFor(inputs[0]);
    CHECK(output.shape() == inputs[0].shape()) << "batch_norm output " << ShapeToString(output.shape());
    if (running_mean_.empty()) {
      running_mean_ = ctx.Allocate({setup_.channels});  // zeros
      running_var_ = ctx.Allocate({setup_.channels});
      Fill(DevicePtr(running_var_), 1.0f, setup_.channels, ctx.stream());
    }
    const void* x = ActivationPtr(inputs[0]);
    void* y = ActivationPtr(output);
    const float* gamma = DevicePtr(parameters_[0].value);
    const float* beta = DevicePtr(parameters_[1].value);
    if (!training) {
      PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          ctx.cudnn(), mode_, &kOne, &kZero, d.data.get(), x, d.data.get(), y, d.channels.get(), gamma, beta,
          DevicePtr(running_mean_), DevicePtr(running_var_), setup_.epsilon));
    } else {
      if (saved_mean_.empty()) {
        saved_mean_ = ctx.Allocate({setup_.channels});
        saved_inv_std_ = ctx.Allocate({setup_.channels});
      }
      const int64_t m = inputs[0].dim(0) * setup_.spatial;
      // m == 1: the batch variance is 0 and adds nothing; cuDNN's correction
      // would divide by m - 1, so its variance average goes to scratch and
      // the running variance only decays.
      std::shared_ptr<Buffer> scratch_var;
      float* running_var = DevicePtr(running_var_);
      if (m == 1) {
        scratch_var = ctx.AllocateBytes(setup_.channels * sizeof(float));
        running_var = static_cast<float*>(scratch_var->data());
      }
      PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
          ctx.cudnn(), mode_, &kOne, &kZero, d.data.get(), x, d.data.get(), y, d.channels.get(), gamma, beta,
          /*exponentialAverageFactor=*/1.0 - static_cast<double>(setup_.momentum), DevicePtr(running_mean_),
          running_var, setup_.epsilon, DevicePtr(saved_mean_), DevicePtr(saved_inv_std_)));
      if (m == 1) Scale(DevicePtr(running_var_), setup_.momentum, setup_.channels, ctx.stream());
    }
    if (fuse_relu_) {
      PSTRAIN_CUDNN_CHECK(cudnnActivationForward(ctx.cudnn(), Relu(), &kOne, d.data.get(), y, &kZero, d.data.get(), y));
    }
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    const Descriptors& d = DescriptorsFor(inputs[0]);
    CHECK(!saved_mean_.empty()) << "batch_norm Backward() without a training Forward()";
    CHECK(grad_output.shape() == inputs[0].shape()) << "batch_norm grad_output " << ShapeToString(grad_output.shape());
    const size_t bytes = inputs[0].num_bytes();
    const void* dy = ActivationPtr(grad_output);
    std::shared_ptr<Buffer> masked_dy;
    if (fuse_relu_) {
      // d(loss)/d(batch norm output): zero where the relu's output is 0. The
      // relu's input is gone, but its output is positive exactly where the
      // input was, so it serves as both.
      masked_dy = ctx.AllocateBytes(bytes);
      const void* y = ActivationPtr(output);
      PSTRAIN_CUDNN_CHECK(cudnnActivationBackward(ctx.cudnn(), Relu(), &kOne, d.data.get(), y, d.data.get(), dy,
                                                  d.data.get(), y, &kZero, d.data.get(), masked_dy->data()));
      dy = masked_dy->data();
    }
    // cuDNN always writes the input's gradient; an unwanted one goes to scratch.
    std::shared_ptr<Buffer> unwanted_dx;
    void* dx = nullptr;
    if (grad_inputs[0].empty()) {
      unwanted_dx = ctx.AllocateBytes(bytes);
      dx = unwanted_dx->data();
    } else {
      CHECK(grad_inputs[0].shape() == inputs[0].shape())
          << "batch_norm grad_input " << ShapeToString(grad_inputs[0].shape());
      dx = ActivationPtr(grad_inputs[0]);
    }
    PSTRAIN_CUDNN_CHECK(cudnnBatchNormalizationBackward(
        ctx.cudnn(), mode_, &kOne, &kZero, &kOne, &kZero, d.data.get(), ActivationPtr(inputs[0]), d.data.get(), dy,
        d.data.get(), dx, d.channels.get(), DevicePtr(parameters_[0].value), DevicePtr(parameters_[0].grad),
        DevicePtr(parameters_[1].grad), setup_.epsilon, DevicePtr(saved_mean_), DevicePtr(saved_inv_std_)));
  }

 private:
  // Descriptors for one batched input shape.
  struct Descriptors {
    TensorDescriptor data;      // input, output and their gradients
    TensorDescriptor channels;  // 1 x C x 1 x 1: gamma, beta, statistics
  };

  // By the input's shape and element type; the channel descriptor is
  // float32 either way (cuDNN derives it so for 16-bit data).
  const Descriptors& DescriptorsFor(const Tensor& in) {
    const std::pair<Shape, cudnnDataType_t> key(in.shape(), ElementType(in));
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    const Shape& input = in.shape();
    CHECK(input == Batched(input.at(0), setup_.shape))
        << "batch_norm set up for " << ShapeToString(setup_.shape) << " got input " << ShapeToString(input);
    Descriptors d;
    d.data = ActivationDescriptor4d(in);
    PSTRAIN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(d.channels.get(), d.data.get(), mode_));
    return cache_.emplace(key, std::move(d)).first->second;
  }

  cudnnActivationDescriptor_t Relu() {
    if (!relu_) relu_.emplace(ReluDescriptor());
    return relu_->get();
  }

  const LayerSpec spec_;
  BatchNormSetup setup_;  // attributes and per-example shape
  bool fuse_relu_ = false;
  cudnnBatchNormMode_t mode_ = CUDNN_BATCHNORM_SPATIAL;
  Tensor running_mean_, running_var_;  // on the GPU, made by the first Forward()
  Tensor saved_mean_, saved_inv_std_;  // the last training batch's, for Backward()
  std::optional<ActivationDescriptor> relu_;
  std::map<std::pair<Shape, cudnnDataType_t>, Descriptors> cache_;  // by batched input shape and type
};

PSTRAIN_REGISTER_LAYER("batch_norm", DeviceKind::kCuda, BatchNorm, {.floats = {"epsilon", "momentum"}});

}  // namespace
}  // namespace pstrain::cuda
