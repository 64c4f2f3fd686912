#include "device/cuda/grid_stride.cuh"
#include "optim/cuda/optimizer_kernels.h"

namespace pstrain::cuda {
namespace {

// s == 1 takes g as is, as the CPU code does (the same arithmetic).
__device__ inline float Scaled(float s, float g) { return s == 1.0f ? g : s * g; }

__global__ void Sgd(const float *w, const float *g, int64_t n, float lr, float s, float wd, float *out) {
  PSTRAIN_GRID_STRIDE(i, n) out[i] = w[i] - lr * (Scaled(s, g[i]) + wd * w[i]);
}

__global__ void Momentum(const float *w, const float *g, int64_t n, float lr, float s, float m, float wd, float *v,
                         float *out) {
  PSTRAIN_GRID_STRIDE(i, n) {
    const float vi = m * v[i] + (Scaled(s, g[i]) + wd * w[i]);
    v[i] = vi;
    out[i] = w[i] - lr * vi;
  }
}

// One block per chunk.
__global__ void MultiSgd(const DeviceChunk *chunks, float lr, float s, float wd) {
  const DeviceChunk c = chunks[blockIdx.x];
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) c.w[i] = c.w[i] - lr * (Scaled(s, c.g[i]) + wd * c.w[i]);
}

__global__ void MultiMomentum(const DeviceChunk *chunks, float lr, float s, float m, float wd) {
  const DeviceChunk c = chunks[blockIdx.x];
  for (int64_t i = threadIdx.x; i < c.n; i += blockDim.x) {
    const float vi = m * c.v[i] + (Scaled(s, c.g[i]) + wd * c.w[i]);
    c.v[i] = vi;
    c.w[i] = c.w[i] - lr * vi;
  }
}

}  // namespace

void SgdKernel(const float *w, const float *g, int64_t n, float lr, float s, float wd, float *out,
               cudaStream_t stream) {
  if (n > 0) Sgd<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(w, g, n, lr, s, wd, out);
}

void MomentumKernel(const float *w, const float *g, int64_t n, float lr, float s, float m, float wd, float *v,
                    float *out, cudaStream_t stream) {
  if (n > 0) Momentum<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(w, g, n, lr, s, m, wd, v, out);
}

void MultiSgdKernel(const DeviceChunk *chunks, int count, float lr, float s, float wd, cudaStream_t stream) {
  if (count > 0) MultiSgd<<<count, kGridStrideThreads, 0, stream>>>(chunks, lr, s, wd);
}

void MultiMomentumKernel(const DeviceChunk *chunks, int count, float lr, float s, float m, float wd,
                         cudaStream_t stream) {
  if (count > 0) MultiMomentum<<<count, kGridStrideThreads, 0, stream>>>(chunks, lr, s, m, wd);
}

}  // namespace pstrain::cuda
