// Softmax cross-entropy over integer labels on CUDA, with the CPU loss's
// numerics (see cpu/softmax_cross_entropy.cc):
//   p = softmax(logits[n]),
//   loss = mean_n(-log(max(p[n, label_n], kSoftmaxCrossEntropyMinProb))),
//   d(loss)/d(logits) = (p - onehot(label)) / N (times grad_scale).
// One kernel computes every row's loss and gradient on the GPU; the per-row
// losses come back to the host, which sums them in double in row order, as
// the CPU does. The labels arrive on the host: they are checked there, staged
// in pinned memory kept between calls and copied to the GPU.
// Queue() does not wait for the GPU: an event recorded after the losses'
// copy to the host is what TakeLoss() waits for, so the backward queued
// between them keeps the GPU busy meanwhile.
#include "models/layers/cuda/softmax_cross_entropy.h"

#include <cstring>
#include <utility>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class SoftmaxCrossEntropy final : public LossLayer {
 public:
  ~SoftmaxCrossEntropy() override {
    if (losses_copied_ != nullptr) cudaEventDestroy(losses_copied_);
  }

  void Queue(DeviceContext& dctx, const Tensor& logits, const int32_t* labels, Tensor* grad_logits,
             float grad_scale) override {
    CHECK_EQ(pending_rows_, 0) << "softmax_cross_entropy: TakeLoss() of the previous batch first (its labels are in "
                                  "flight)";
    CheckLogitsAndLabels(logits, labels);
    CudaContext& ctx = AsCuda(dctx);
    const int64_t n = logits.dim(0), classes = logits.dim(1);
    CHECK_GT(n, 0) << "logits hold no examples";
    float* grad = nullptr;
    if (grad_logits != nullptr) {
      CHECK(grad_logits->shape() == logits.shape());
      grad = DevicePtr(*grad_logits);
    }
    if (staged_labels_.num_elements() < n) {
      staged_labels_ = ctx.AllocateHost({n});  // float-sized slots holding int32 labels
      staged_losses_ = ctx.AllocateHost({n});
    }
    const size_t bytes = n * sizeof(float);
    static_assert(sizeof(int32_t) == sizeof(float));
    std::memcpy(staged_labels_.raw(), labels, bytes);
    std::shared_ptr<Buffer> device_labels = ctx.AllocateBytes(bytes);
    std::shared_ptr<Buffer> device_losses = ctx.AllocateBytes(bytes);
    PSTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(device_labels->data(), staged_labels_.raw(), bytes, cudaMemcpyHostToDevice, ctx.stream()));
    SoftmaxCrossEntropyRows(DevicePtr(logits), static_cast<const int32_t*>(device_labels->data()), n, classes,
                            kSoftmaxCrossEntropyMinProb, grad_scale / static_cast<float>(n),
                            static_cast<float*>(device_losses->data()), grad, ctx.stream());
    PSTRAIN_CUDA_CHECK(cudaGetLastError());
    PSTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(staged_losses_.raw(), device_losses->data(), bytes, cudaMemcpyDeviceToHost, ctx.stream()));
    if (losses_copied_ == nullptr) {
      PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&losses_copied_, cudaEventDisableTiming));
    }
    PSTRAIN_CUDA_CHECK(cudaEventRecord(losses_copied_, ctx.stream()));
    pending_rows_ = n;
  }

  float TakeLoss() override {
    CHECK_GT(pending_rows_, 0) << "softmax_cross_entropy: TakeLoss() without a Queue()";
    PSTRAIN_CUDA_CHECK(cudaEventSynchronize(losses_copied_));
    const int64_t n = std::exchange(pending_rows_, 0);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += staged_losses_.data()[i];
    return static_cast<float>(total / static_cast<double>(n));
  }

 private:
  // Recorded after the per-row losses' copy to staged_losses_.
  cudaEvent_t losses_copied_ = nullptr;
  int64_t pending_rows_ = 0;  // of a Queue not yet taken (0: none)
  // Pinned host staging, grown to the largest batch: the labels on their way
  // to the GPU, the per-row losses on their way back.
  Tensor staged_labels_, staged_losses_;
};

const bool kRegistered =
    RegisterSoftmaxCrossEntropy(DeviceKind::kCuda, [] { return std::make_unique<SoftmaxCrossEntropy>(); });

}  // namespace
}  // namespace pstrain::cuda
