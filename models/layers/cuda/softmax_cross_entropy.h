// The kernel of the CUDA softmax cross-entropy loss (softmax_cross_entropy.cc
// registers the loss; reach it through CreateSoftmaxCrossEntropy(DeviceKind::kCuda)).
// Kept free of layer.h: nvcc rejects some of its C++20 (common/tensor.h's
// defaulted comparison).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::cuda {

// The kernel behind the loss (softmax_cross_entropy_kernels.cu). For each of the
// `rows` > 0 rows of `logits` ([rows, classes] on the GPU), with p the row's
// softmax (its maximum subtracted before exponentiating):
//   losses[row] = -log(max(p[label], min_prob)), and when `grad` is non-null
//   grad[row, j] = p[j] * grad_scale, minus grad_scale at j == label.
// `labels` (device, one per row) must lie in [0, classes). Queued on `stream`.
void SoftmaxCrossEntropyRows(const float* logits, const int32_t* labels, int64_t rows, int64_t classes, float min_prob,
                             float grad_scale, float* losses, float* grad, cudaStream_t stream);

}  // namespace pstrain::cuda
