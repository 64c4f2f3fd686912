// Kernels of the 16-bit channels-last activations (half_nhwc_layout.h):
// conversions from and to plain float32 NCHW, and sums. Every function
// queues work on `stream` and returns at once; nothing is queued for an
// empty tensor. Rounding to 16 bits is to nearest even (half_cast.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device/cuda/half_cast.h"
#include "device/cuda/nhwc_index.h"

namespace pstrain::cuda {

// nhwc = plain rounded to `type` and moved channels last.
void ToHalfNhwc(const float* plain, void* nhwc, const NchwExtents& e, HalfType type, cudaStream_t stream);
// plain = nhwc widened to float32 (exact) and moved back to NCHW.
void FromHalfNhwc(const void* nhwc, float* plain, const NchwExtents& e, HalfType type, cudaStream_t stream);
// out[i] = a[i] + b[i] over n elements of `type`, summed in float32 and
// rounded once (out may alias a or b).
void AddHalf(const void* a, const void* b, void* out, int64_t n, HalfType type, cudaStream_t stream);

}  // namespace pstrain::cuda
