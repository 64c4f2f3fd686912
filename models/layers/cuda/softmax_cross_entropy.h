// The CUDA softmax cross-entropy loss; reach it through
// CreateSoftmaxCrossEntropy(DeviceKind::kCuda).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

// Declared, not included: the kernel file includes this header, and nvcc
// rejects some of layer.h's C++20 (common/tensor.h's defaulted comparison).
namespace pstrain {
class LossLayer;
}  // namespace pstrain

namespace pstrain::cuda {

std::unique_ptr<LossLayer> NewSoftmaxCrossEntropy();

// The kernel behind it (softmax_cross_entropy_kernels.cu). For each of the
// `rows` > 0 rows of `logits` ([rows, classes] on the GPU), with p the row's
// softmax (its maximum subtracted before exponentiating):
//   losses[row] = -log(max(p[label], min_prob)), and when `grad` is non-null
//   grad[row, j] = p[j] * grad_scale, minus grad_scale at j == label.
// `labels` (device, one per row) must lie in [0, classes). Queued on `stream`.
void SoftmaxCrossEntropyRows(const float* logits, const int32_t* labels, int64_t rows, int64_t classes, float min_prob,
                             float grad_scale, float* losses, float* grad, cudaStream_t stream);

}  // namespace pstrain::cuda
