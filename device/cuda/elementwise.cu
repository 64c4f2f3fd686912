#include "device/cuda/elementwise.h"
#include "device/cuda/grid_stride.cuh"

namespace pstrain::cuda {
namespace {

__global__ void AddIntoKernel(float *sum, const float *addend, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) sum[i] += addend[i];
}

__global__ void AddKernel(const float *a, const float *b, float *out, int64_t n) {
  PSTRAIN_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void ScaleKernel(float *x, float alpha, int64_t n) { PSTRAIN_GRID_STRIDE(i, n) x[i] *= alpha; }

__global__ void FillKernel(float *x, float value, int64_t n) { PSTRAIN_GRID_STRIDE(i, n) x[i] = value; }

// Threads that meet a non-finite value all store the same 1: no atomics.
__global__ void ScaleAndFlagKernel(float *x, float factor, int64_t n, int *non_finite) {
  bool bad = false;
  PSTRAIN_GRID_STRIDE(i, n) {
    const float v = x[i] * factor;
    x[i] = v;
    bad |= !isfinite(v);
  }
  if (bad) *non_finite = 1;
}

}  // namespace

void AddInto(float *sum, const float *addend, int64_t n, cudaStream_t stream) {
  if (n > 0) AddIntoKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(sum, addend, n);
}

void Add(const float *a, const float *b, float *out, int64_t n, cudaStream_t stream) {
  if (n > 0) AddKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(a, b, out, n);
}

void Scale(float *x, float alpha, int64_t n, cudaStream_t stream) {
  if (n > 0) ScaleKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(x, alpha, n);
}

void ScaleAndFlagNonFinite(float *x, float factor, int64_t n, int *non_finite, cudaStream_t stream) {
  if (n > 0) ScaleAndFlagKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(x, factor, n, non_finite);
}

void Fill(float *x, float value, int64_t n, cudaStream_t stream) {
  if (n > 0) FillKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(x, value, n);
}

}  // namespace pstrain::cuda
