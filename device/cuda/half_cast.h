// Conversions between float32 and the 16-bit floating-point types of mixed
// precision on CUDA (precision: fp16 | bf16, device/device_context.h).
// Every function queues work on `stream` and returns at once; `n` counts
// elements; n == 0 queues nothing. Rounding is to nearest even; fp16
// overflows to +-inf beyond 65504, bf16 keeps float32's range.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace pstrain::cuda {

enum class HalfType { kFp16, kBf16 };

// Bytes per element of either type.
inline constexpr size_t kHalfBytes = 2;

// "bf16" or "fp16".
inline const char* HalfTypeName(HalfType type) { return type == HalfType::kBf16 ? "bf16" : "fp16"; }

// dst[i] = src[i] rounded to `type`; dst holds n elements of that type.
void CastToHalf(const float* src, void* dst, int64_t n, HalfType type, cudaStream_t stream);
// dst[i] = src[i] widened to float32 (exact); src holds n elements of `type`.
void CastFromHalf(const void* src, float* dst, int64_t n, HalfType type, cudaStream_t stream);

}  // namespace pstrain::cuda
