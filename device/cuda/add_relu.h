// The end of a residual block in one pass each way: y = relu(a + b) forward,
// and relu's gradient given to both of the sum's inputs backward. Used by the
// add layer when it has taken over the relu that follows it (Layer::Fuse).
//
// Elements are float32 or one 16-bit type (HalfType); 16-bit sums are taken
// in float32 and rounded once. Semantics match the CPU's relu: NaN
// propagates forward, and the gradient passes where y > 0 and is 0
// elsewhere (at y == 0 too). Every function queues work on `stream` and
// returns at once; n counts elements; n == 0 queues nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device/cuda/half_cast.h"

namespace pstrain::cuda {

// out[i] = relu(a[i] + b[i]) (out may alias a or b).
void AddRelu(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);
void AddReluHalf(const void* a, const void* b, void* out, int64_t n, HalfType type, cudaStream_t stream);

// dx0[i] = dx1[i] = y[i] > 0 ? dy[i] : 0, where y is relu's output; dx1 may
// be null (one gradient wanted) and either may alias dy.
void ReluGradient(const float* y, const float* dy, float* dx0, float* dx1, int64_t n, cudaStream_t stream);
void ReluGradientHalf(const void* y, const void* dy, void* dx0, void* dx1, int64_t n, HalfType type,
                      cudaStream_t stream);

}  // namespace pstrain::cuda
