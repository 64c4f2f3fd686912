// The CUDA kernels of the optimizers (optim/cuda/<name>.cc wrap them behind
// the Optimizer interface). Same arithmetic as the CPU files, element for
// element. Each queues one kernel on `stream` and returns; n == 0 queues
// nothing. `out` may be `w` (in place).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::cuda {

// out[i] = w[i] - lr * (s * g[i] + wd * w[i])                      (optim/sgd.cc)
void SgdKernel(const float* w, const float* g, int64_t n, float lr, float s, float wd, float* out, cudaStream_t stream);
// v[i] = m * v[i] + (s * g[i] + wd * w[i]);  out[i] = w[i] - lr * v[i]   (optim/momentum.cc)
void MomentumKernel(const float* w, const float* g, int64_t n, float lr, float s, float m, float wd, float* v,
                    float* out, cudaStream_t stream);

// One chunk of a multi-tensor update (optim/tensor_chunks.h), its pointers
// offset to the chunk: w updated in place, g, v (momentum's slot; null for
// SGD), n elements.
struct DeviceChunk {
  float* w;
  const float* g;
  float* v;
  int64_t n;
};
// The kernels above over `count` chunks (a device array) in one launch, a
// thread block per chunk: element for element the same arithmetic.
void MultiSgdKernel(const DeviceChunk* chunks, int count, float lr, float s, float wd, cudaStream_t stream);
void MultiMomentumKernel(const DeviceChunk* chunks, int count, float lr, float s, float m, float wd,
                         cudaStream_t stream);

}  // namespace pstrain::cuda
