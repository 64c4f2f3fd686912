// The CUDA layers that compute on plain float32 (dense, flatten, concat,
// lrn, dropout, and the others when an input comes in another layout) take
// 16-bit channels-last activations (HalfNhwcLayout, half_nhwc_layout.h) by
// converting at their edges: the layer contract's "a layer accepts inputs
// in any layout". Each conversion queues work on the context's stream and
// takes its memory from the caching allocator.
#pragma once

#include "common/tensor.h"
#include "device/cuda/cuda_context.h"

namespace pstrain::cuda {

// `t` itself when plain; otherwise a plain float32 copy of it.
Tensor PlainActivation(CudaContext& ctx, const Tensor& t);

// Where a plain float32 computation writes a gradient that belongs in
// `target` (any layout the context allocates, or empty for an unwanted
// one): `target` itself when plain or empty, otherwise a plain tensor of
// its shape that Store() converts into `target`.
class PlainGradient {
 public:
  PlainGradient(CudaContext& ctx, const Tensor& target);
  const Tensor& get() const { return plain_; }
  // Converts into the target; nothing when it was plain or empty.
  void Store();

 private:
  CudaContext& ctx_;
  const Tensor target_;
  Tensor plain_;
};

}  // namespace pstrain::cuda
