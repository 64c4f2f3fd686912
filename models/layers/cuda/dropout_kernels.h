// Kernels of the CUDA dropout layer (dropout.cc). Both queue work on `stream`
// and return at once; n == 0 queues nothing.
//
// The mask is the CPU layer's (cpu/dropout.cc), bit for bit: with
// key = SplitMix64(SplitMix64(seed) ^ step), element i is kept when the top
// 32 bits of SplitMix64(key + i) are >= rate * 2^32, and a kept element is
// scaled by 1 / (1 - rate) (computed in double, rounded to float). So one
// (seed, step) draws the same mask on either device, and rate 0 keeps all
// with scale exactly 1.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pstrain::cuda {

// Draws keep[i] (1 kept, 0 dropped) for training step `step` and writes
// y[i] = x[i] * (keep[i] ? scale : 0).
void DropoutForward(const float* x, float* y, uint8_t* keep, int64_t n, double rate, uint64_t seed, uint64_t step,
                    cudaStream_t stream);
// dx[i] = dy[i] * (keep[i] ? scale : 0), with the mask Forward drew.
void DropoutBackward(const float* dy, const uint8_t* keep, float* dx, int64_t n, double rate, cudaStream_t stream);

}  // namespace pstrain::cuda
