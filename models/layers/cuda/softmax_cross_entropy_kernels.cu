// The kernel of the CUDA softmax cross-entropy (see softmax_cross_entropy.h).
#include <cub/block/block_reduce.cuh>
#include <cuda/functional>

#include "models/layers/cuda/softmax_cross_entropy.h"

namespace pstrain::cuda {
namespace {

constexpr int kThreads = 256;

// One block per row: the row's maximum, then the sum of exp(x - max), then
// the probabilities, as p = exp(x - max) / sum.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int64_t classes, float min_prob,
                                          float grad_scale, float* losses, float* grad) {
  using Reduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename Reduce::TempStorage scratch;
  __shared__ float row_max, row_sum;
  const int64_t row = blockIdx.x;
  const float* x = logits + row * classes;

  float partial_max = -INFINITY;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) partial_max = fmaxf(partial_max, x[j]);
  const float max = Reduce(scratch).Reduce(partial_max, ::cuda::maximum<>{});
  if (threadIdx.x == 0) row_max = max;
  __syncthreads();  // also lets `scratch` be reused

  float partial_sum = 0.0f;
  for (int64_t j = threadIdx.x; j < classes; j += kThreads) partial_sum += expf(x[j] - row_max);
  const float sum = Reduce(scratch).Sum(partial_sum);
  if (threadIdx.x == 0) row_sum = sum;
  __syncthreads();

  const int32_t label = labels[row];
  if (grad != nullptr) {
    float* g = grad + row * classes;
    for (int64_t j = threadIdx.x; j < classes; j += kThreads) {
      const float scaled = expf(x[j] - row_max) / row_sum * grad_scale;
      g[j] = j == label ? scaled - grad_scale : scaled;
    }
  }
  if (threadIdx.x == 0) losses[row] = -logf(fmaxf(expf(x[label] - row_max) / row_sum, min_prob));
}

}  // namespace

void SoftmaxCrossEntropyRows(const float* logits, const int32_t* labels, int64_t rows, int64_t classes, float min_prob,
                             float grad_scale, float* losses, float* grad, cudaStream_t stream) {
  SoftmaxCrossEntropyKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, labels, classes, min_prob,
                                                                                  grad_scale, losses, grad);
}

}  // namespace pstrain::cuda
