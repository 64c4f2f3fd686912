#include "device/cuda/grid_stride.cuh"
#include "device/cuda/half_nhwc.h"
#include "device/cuda/half_types.cuh"

namespace pstrain::cuda {
namespace {

// Writes run in the destination's order, so they coalesce.
template <typename Type>
__global__ void ToHalfNhwcKernel(const float *plain, typename Type::T *nhwc, NchwExtents e) {
  PSTRAIN_GRID_STRIDE(i, e.count()) nhwc[i] = Type::From(plain[PlainIndexOf(i, e)]);
}

template <typename Type>
__global__ void FromHalfNhwcKernel(const typename Type::T *nhwc, float *plain, NchwExtents e) {
  PSTRAIN_GRID_STRIDE(i, e.count()) plain[i] = Type::To(nhwc[NhwcIndexOf(i, e)]);
}

template <typename Type>
__global__ void AddHalfKernel(const typename Type::T *a, const typename Type::T *b, typename Type::T *out, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) out[i] = Type::From(Type::To(a[i]) + Type::To(b[i]));
}

}  // namespace

void ToHalfNhwc(const float *plain, void *nhwc, const NchwExtents &e, HalfType type, cudaStream_t stream) {
  if (e.count() <= 0) return;
  WithHalfType(type, [&](auto tag) {
    using Type = decltype(tag);
    ToHalfNhwcKernel<Type><<<GridStrideBlocks(e.count()), kGridStrideThreads, 0, stream>>>(
        plain, static_cast<typename Type::T *>(nhwc), e);
  });
}

void FromHalfNhwc(const void *nhwc, float *plain, const NchwExtents &e, HalfType type, cudaStream_t stream) {
  if (e.count() <= 0) return;
  WithHalfType(type, [&](auto tag) {
    using Type = decltype(tag);
    FromHalfNhwcKernel<Type><<<GridStrideBlocks(e.count()), kGridStrideThreads, 0, stream>>>(
        static_cast<const typename Type::T *>(nhwc), plain, e);
  });
}

void AddHalf(const void *a, const void *b, void *out, int64_t n, HalfType type, cudaStream_t stream) {
  if (n <= 0) return;
  WithHalfType(type, [&](auto tag) {
    using Type = decltype(tag);
    using T = typename Type::T;
    AddHalfKernel<Type><<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(
        static_cast<const T *>(a), static_cast<const T *>(b), static_cast<T *>(out), n);
  });
}

}  // namespace pstrain::cuda
