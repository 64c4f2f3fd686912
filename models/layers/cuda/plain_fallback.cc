#include "models/layers/cuda/plain_fallback.h"

namespace pstrain::cuda {

Tensor PlainActivation(CudaContext& ctx, const Tensor& t) {
  if (t.is_plain() || t.empty()) return t;
  const Tensor plain = ctx.AllocateUninitialized(t.shape());
  ctx.Convert(t, plain);
  return plain;
}

PlainGradient::PlainGradient(CudaContext& ctx, const Tensor& target) : ctx_(ctx), target_(target), plain_(target) {
  if (target.is_plain() || target.empty()) return;
  plain_ = ctx.AllocateUninitialized(target.shape());
}

void PlainGradient::Store() {
  if (plain_.raw() != target_.raw()) ctx_.Convert(plain_, target_);
}

}  // namespace pstrain::cuda
