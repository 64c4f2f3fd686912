// The 16-bit types of mixed precision as CUDA kernels see them: each with
// its device type and conversions, and the dispatch from HalfType, so one
// kernel template serves both. Include from .cu files only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "device/cuda/half_cast.h"

namespace pstrain::cuda {

struct Fp16 {
  using T = __half;
  static __device__ T From(float x) { return __float2half_rn(x); }
  static __device__ float To(T x) { return __half2float(x); }
};
struct Bf16 {
  using T = __nv_bfloat16;
  static __device__ T From(float x) { return __float2bfloat16_rn(x); }
  static __device__ float To(T x) { return __bfloat162float(x); }
};

// Calls f(Fp16{}) or f(Bf16{}) for `type`.
template <typename F>
void WithHalfType(HalfType type, F &&f) {
  if (type == HalfType::kFp16) {
    f(Fp16{});
  } else {
    f(Bf16{});
  }
}

}  // namespace pstrain::cuda
