#include "models/layers/cuda/plain_fallback.h"

namespace pstrain::cuda {

Tensor PlainActivation(CudaContext& ctx, const Tensor& t) {
  if (t.is_plain() || t.empty()) return t;
  Tensor plain(t.shape(), DType::kFloat32, ctx.AllocateBytes(static_cast<size_t>(t.num_elements()) * sizeof(float)),
               t.device());
  ctx.Convert(t, plain);
  return plain;
}

PlainGradient::PlainGradient(CudaContext& ctx, const Tensor& target) : ctx_(ctx), target_(target), plain_(target) {
  if (target.is_plain() || target.empty()) return;
  plain_ = Tensor(target.shape(), DType::kFloat32,
                  ctx.AllocateBytes(static_cast<size_t>(target.num_elements()) * sizeof(float)), target.device());
}

void PlainGradient::Store() {
  if (plain_.raw() != target_.raw()) ctx_.Convert(plain_, target_);
}

}  // namespace pstrain::cuda
