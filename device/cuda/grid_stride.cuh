// Launch shape and loop of the elementwise kernels: grid-stride loops over
// `n` elements with kThreads threads per block and at most 65535 blocks, so
// huge tensors loop inside the kernel rather than launching millions of
// blocks. Include from .cu files only.
#pragma once

#include <cstdint>

namespace pstrain::cuda {

constexpr int kGridStrideThreads = 256;

inline unsigned GridStrideBlocks(int64_t n) {
  const int64_t blocks = (n + kGridStrideThreads - 1) / kGridStrideThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

}  // namespace pstrain::cuda

// for (int64_t i = ...; i < n; ...) over this thread's elements.
#define PSTRAIN_GRID_STRIDE(i, n)                                                        \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
