// Small elementwise CUDA kernels shared by the CUDA layers, the context and
// the GPU strategies. Every function queues work on `stream` and returns at
// once; `n` counts floats; n == 0 queues nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::cuda {

// sum[i] += addend[i]
void AddInto(float* sum, const float* addend, int64_t n, cudaStream_t stream);
// out[i] = a[i] + b[i] (out may alias a or b)
void Add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
// x[i] *= alpha
void Scale(float* x, float alpha, int64_t n, cudaStream_t stream);
// x[i] = value
void Fill(float* x, float value, int64_t n, cudaStream_t stream);
// The PS optimizers (ps/optimizers/), on the device, with weight decay wd:
// SGD:      value[i] -= lr * (grad[i] + wd * value[i])
void ApplySgd(float* value, const float* grad, float lr, float wd, int64_t n, cudaStream_t stream);
// Momentum: accum[i] = momentum * accum[i] + (grad[i] + wd * value[i]);  value[i] -= lr * accum[i]
void ApplyMomentum(float* value, const float* grad, float* accum, float lr, float momentum, float wd, int64_t n,
                   cudaStream_t stream);

}  // namespace pstrain::cuda
