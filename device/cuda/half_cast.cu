#include "device/cuda/grid_stride.cuh"
#include "device/cuda/half_cast.h"
#include "device/cuda/half_types.cuh"

namespace pstrain::cuda {
namespace {

template <typename Type>
__global__ void ToHalfKernel(const float *src, typename Type::T *dst, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) dst[i] = Type::From(src[i]);
}

template <typename Type>
__global__ void FromHalfKernel(const typename Type::T *src, float *dst, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) dst[i] = Type::To(src[i]);
}

template <typename Type>
void ToHalf(const float *src, void *dst, int64_t n, cudaStream_t stream) {
  ToHalfKernel<Type>
      <<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(src, static_cast<typename Type::T *>(dst), n);
}

template <typename Type>
void FromHalf(const void *src, float *dst, int64_t n, cudaStream_t stream) {
  FromHalfKernel<Type>
      <<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(static_cast<const typename Type::T *>(src), dst, n);
}

}  // namespace

void CastToHalf(const float *src, void *dst, int64_t n, HalfType type, cudaStream_t stream) {
  if (n <= 0) return;
  if (type == HalfType::kFp16) {
    ToHalf<Fp16>(src, dst, n, stream);
  } else {
    ToHalf<Bf16>(src, dst, n, stream);
  }
}

void CastFromHalf(const void *src, float *dst, int64_t n, HalfType type, cudaStream_t stream) {
  if (n <= 0) return;
  if (type == HalfType::kFp16) {
    FromHalf<Fp16>(src, dst, n, stream);
  } else {
    FromHalf<Bf16>(src, dst, n, stream);
  }
}

}  // namespace pstrain::cuda
