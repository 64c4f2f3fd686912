#include "device/cuda/grid_stride.cuh"
#include "models/layers/cuda/dropout_kernels.h"

namespace pstrain::cuda {
namespace {

__host__ __device__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float KeepScale(double rate) { return static_cast<float>(1.0 / (1.0 - rate)); }

__global__ void DropoutForwardKernel(const float *x, float *y, uint8_t *keep, int64_t n, uint64_t key,
                                     uint64_t threshold, float scale) {
  PSTRAIN_GRID_STRIDE(i, n) {
    const bool kept = (SplitMix64(key + static_cast<uint64_t>(i)) >> 32) >= threshold;
    keep[i] = kept ? 1 : 0;
    y[i] = x[i] * (kept ? scale : 0.0f);
  }
}

__global__ void DropoutBackwardKernel(const float *dy, const uint8_t *keep, float *dx, int64_t n, float scale) {
  PSTRAIN_GRID_STRIDE(i, n) { dx[i] = dy[i] * (keep[i] ? scale : 0.0f); }
}

}  // namespace

void DropoutForward(const float *x, float *y, uint8_t *keep, int64_t n, double rate, uint64_t seed, uint64_t step,
                    cudaStream_t stream) {
  if (n == 0) return;
  const uint64_t key = SplitMix64(SplitMix64(seed) ^ step);
  const uint64_t threshold = static_cast<uint64_t>(rate * 4294967296.0);
  DropoutForwardKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(x, y, keep, n, key, threshold,
                                                                               KeepScale(rate));
}

void DropoutBackward(const float *dy, const uint8_t *keep, float *dx, int64_t n, double rate, cudaStream_t stream) {
  if (n > 0)
    DropoutBackwardKernel<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(dy, keep, dx, n, KeepScale(rate));
}

}  // namespace pstrain::cuda
