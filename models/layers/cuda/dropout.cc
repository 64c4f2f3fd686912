// dropout on CUDA: inverted dropout. Same contract as the CPU layer
// (cpu/dropout.cc): attributes "rate" in [0, 1) (default 0.5) and "seed"
// (default 0); any input shape, output alike; no parameters. Training:
// y = x * mask, mask[i] = 0 with probability `rate`, else 1 / (1 - rate);
// inference: y = x.
//
// The mask is drawn on the device by a counter-based hash of (seed, step,
// index), step counting this layer's training forwards: the CPU layer's
// function, so both devices draw the same masks (dropout_kernels.h). The keep
// flags of the last training Forward() (one byte per element, grown to the
// largest input) are what Backward() applies.
// The output is plain float32; 16-bit channels-last inputs (HalfNhwcLayout)
// are converted, and their gradients back (plain_fallback.h).
#include <cstdint>
#include <memory>
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "models/layers/cuda/dropout_kernels.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class Dropout final : public Layer {
 public:
  explicit Dropout(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupDropout(spec_, input_shapes));
    return setup_.shape;
  }

  // Backward reads its mask and shapes only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const Tensor x = PlainActivation(ctx, inputs[0]);
    CHECK(output.shape() == x.shape()) << "dropout: output " << ShapeToString(output.shape());
    if (!training) {
      PSTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(DevicePtr(output), DevicePtr(x), x.num_bytes(), cudaMemcpyDeviceToDevice, ctx.stream()));
      return;
    }
    const int64_t n = x.num_elements();
    if (n > keep_capacity_) {
      keep_ = ctx.AllocateBytes(static_cast<size_t>(n));
      keep_capacity_ = n;
    }
    keep_size_ = n;
    DropoutForward(DevicePtr(x), DevicePtr(output), static_cast<uint8_t*>(keep_->data()), n, setup_.rate, setup_.seed,
                   step_++, ctx.stream());
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CudaContext& ctx = AsCuda(dctx);
    const int64_t n = inputs[0].num_elements();
    CHECK_EQ(n, keep_size_) << "dropout: Backward() without a training Forward() on "
                            << ShapeToString(inputs[0].shape());
    CHECK(grad_output.shape() == inputs[0].shape() && grad_inputs[0].shape() == inputs[0].shape())
        << "dropout: gradient shapes " << ShapeToString(grad_output.shape()) << ", "
        << ShapeToString(grad_inputs[0].shape());
    PlainGradient dx(ctx, grad_inputs[0]);
    DropoutBackward(DevicePtr(grad_output), static_cast<const uint8_t*>(keep_->data()), DevicePtr(dx.get()), n,
                    setup_.rate, ctx.stream());
    dx.Store();
  }

 private:
  const LayerSpec spec_;
  DropoutSetup setup_;  // rate and seed
  uint64_t step_ = 0;
  std::shared_ptr<Buffer> keep_;  // keep flags of the last training Forward()
  int64_t keep_capacity_ = 0;     // bytes of keep_
  int64_t keep_size_ = -1;        // elements the last training Forward() drew; -1: none yet
};

PSTRAIN_REGISTER_LAYER("dropout", DeviceKind::kCuda, Dropout, {.ints = {"seed"}, .floats = {"rate"}});

}  // namespace
}  // namespace pstrain::cuda
