// Small elementwise CUDA kernels shared by the CUDA context, the CUDA layers
// and the GPU strategies. Every function queues work on `stream` and returns at
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
// x[i] *= factor, then *non_finite = 1 when any x[i] is inf or NaN (left
// as it was otherwise: clear it before the first call of a step). Loss
// scaling's unscale and overflow check on the device (optim/loss_scaler.h).
void ScaleAndFlagNonFinite(float* x, float factor, int64_t n, int* non_finite, cudaStream_t stream);

}  // namespace pstrain::cuda
