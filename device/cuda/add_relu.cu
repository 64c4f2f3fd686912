#include "device/cuda/add_relu.h"
#include "device/cuda/grid_stride.cuh"
#include "device/cuda/half_types.cuh"

namespace pstrain::cuda {
namespace {

// Float32 as the 16-bit types' kernels see them.
struct Fp32 {
  using T = float;
  static __device__ T From(float x) { return x; }
  static __device__ float To(T x) { return x; }
};

// x < 0 ? 0 : x keeps a NaN (a comparison with NaN is false), as the CPU's
// relu does.
template <typename Type>
__global__ void AddReluKernel(const typename Type::T *a, const typename Type::T *b, typename Type::T *out, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) {
    const float sum = Type::To(Type::From(Type::To(a[i]) + Type::To(b[i])));
    out[i] = Type::From(sum < 0.0f ? 0.0f : sum);
  }
}

template <typename Type>
__global__ void ReluGradientKernel(const typename Type::T *y, const typename Type::T *dy, typename Type::T *dx0,
                                   typename Type::T *dx1, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) {
    const typename Type::T g = Type::To(y[i]) > 0.0f ? dy[i] : Type::From(0.0f);
    dx0[i] = g;
    if (dx1 != nullptr) dx1[i] = g;
  }
}

template <typename Type>
void LaunchAddRelu(const void *a, const void *b, void *out, int64_t n, cudaStream_t stream) {
  using T = typename Type::T;
  AddReluKernel<Type><<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(
      static_cast<const T *>(a), static_cast<const T *>(b), static_cast<T *>(out), n);
}

template <typename Type>
void LaunchReluGradient(const void *y, const void *dy, void *dx0, void *dx1, int64_t n, cudaStream_t stream) {
  using T = typename Type::T;
  ReluGradientKernel<Type><<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(
      static_cast<const T *>(y), static_cast<const T *>(dy), static_cast<T *>(dx0), static_cast<T *>(dx1), n);
}

}  // namespace

void AddRelu(const float *a, const float *b, float *out, int64_t n, cudaStream_t stream) {
  if (n > 0) LaunchAddRelu<Fp32>(a, b, out, n, stream);
}

void AddReluHalf(const void *a, const void *b, void *out, int64_t n, HalfType type, cudaStream_t stream) {
  if (n <= 0) return;
  WithHalfType(type, [&](auto tag) { LaunchAddRelu<decltype(tag)>(a, b, out, n, stream); });
}

void ReluGradient(const float *y, const float *dy, float *dx0, float *dx1, int64_t n, cudaStream_t stream) {
  if (n > 0) LaunchReluGradient<Fp32>(y, dy, dx0, dx1, n, stream);
}

void ReluGradientHalf(const void *y, const void *dy, void *dx0, void *dx1, int64_t n, HalfType type,
                      cudaStream_t stream) {
  if (n <= 0) return;
  WithHalfType(type, [&](auto tag) { LaunchReluGradient<decltype(tag)>(y, dy, dx0, dx1, n, stream); });
}

}  // namespace pstrain::cuda
