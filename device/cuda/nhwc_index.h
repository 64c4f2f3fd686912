// Index arithmetic of the channels-last (NHWC) arrangement against the plain
// NCHW one, shared by the conversion kernels (half_nhwc.cu) and the host
// code that tests them: one definition of where an element goes.
//
// A tensor of n x c x hw elements (hw: the spatial elements per channel,
// h * w; a [N, C] tensor has hw = 1) is stored plainly at
// ((in * c) + ic) * hw + s and channels-last at ((in * hw) + s) * c + ic.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PSTRAIN_HOST_DEVICE __host__ __device__
#else
#define PSTRAIN_HOST_DEVICE
#endif

namespace pstrain::cuda {

// The extents of a 4-D (or [N, C]) activation, as the conversions see them.
struct NchwExtents {
  int64_t n = 0;
  int64_t c = 0;
  int64_t hw = 1;
  PSTRAIN_HOST_DEVICE int64_t count() const { return n * c * hw; }
};

// The channels-last index of the element at plain index `plain`
// (0 <= plain < e.count()).
PSTRAIN_HOST_DEVICE inline int64_t NhwcIndexOf(int64_t plain, const NchwExtents& e) {
  const int64_t s = plain % e.hw;
  const int64_t ic = (plain / e.hw) % e.c;
  const int64_t in = plain / (e.hw * e.c);
  return (in * e.hw + s) * e.c + ic;
}

// The plain index of the element at channels-last index `nhwc`: the inverse
// of NhwcIndexOf.
PSTRAIN_HOST_DEVICE inline int64_t PlainIndexOf(int64_t nhwc, const NchwExtents& e) {
  const int64_t ic = nhwc % e.c;
  const int64_t s = (nhwc / e.c) % e.hw;
  const int64_t in = nhwc / (e.c * e.hw);
  return (in * e.c + ic) * e.hw + s;
}

}  // namespace pstrain::cuda
