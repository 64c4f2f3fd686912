#include "device/cuda/grid_stride.cuh"
#include "optim/cuda/optimizer_kernels.h"

namespace pstrain::cuda {
namespace {

__global__ void Sgd(const float *w, const float *g, int64_t n, float lr, float wd, float *out) {
  PSTRAIN_GRID_STRIDE(i, n) out[i] = w[i] - lr * (g[i] + wd * w[i]);
}

__global__ void Momentum(const float *w, const float *g, int64_t n, float lr, float m, float wd, float *v, float *out) {
  PSTRAIN_GRID_STRIDE(i, n) {
    const float vi = m * v[i] + (g[i] + wd * w[i]);
    v[i] = vi;
    out[i] = w[i] - lr * vi;
  }
}

}  // namespace

void SgdKernel(const float *w, const float *g, int64_t n, float lr, float wd, float *out, cudaStream_t stream) {
  if (n > 0) Sgd<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(w, g, n, lr, wd, out);
}

void MomentumKernel(const float *w, const float *g, int64_t n, float lr, float m, float wd, float *v, float *out,
                    cudaStream_t stream) {
  if (n > 0) Momentum<<<GridStrideBlocks(n), kGridStrideThreads, 0, stream>>>(w, g, n, lr, m, wd, v, out);
}

}  // namespace pstrain::cuda
