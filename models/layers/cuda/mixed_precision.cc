#include "models/layers/cuda/mixed_precision.h"

#include "device/cuda/half_nhwc.h"
#include "device/cuda/half_nhwc_layout.h"

namespace pstrain::cuda {

std::optional<HalfMath> HalfMathOf(const DeviceContext& ctx) {
  switch (ctx.precision()) {
    case Precision::kFp16:
      return HalfMath{HalfType::kFp16, CUDNN_DATA_HALF, CUDA_R_16F};
    case Precision::kBf16:
      return HalfMath{HalfType::kBf16, CUDNN_DATA_BFLOAT16, CUDA_R_16BF};
    case Precision::kFp32:
      break;
  }
  return std::nullopt;
}

ComputeOperand::ComputeOperand(CudaContext& ctx, const std::optional<HalfMath>& half, float* fp32, int64_t n, bool read)
    : ComputeOperand(ctx, half, fp32, n) {
  if (!half_) {
    own_ = fp32;
    return;
  }
  buffer_ = ctx.AllocateBytes(static_cast<size_t>(n) * kHalfBytes);
  if (read) CastToHalf(fp32, buffer_->data(), n, half_->type, ctx.stream());
}

ComputeOperand ComputeOperand::ChannelsLast(CudaContext& ctx, const HalfMath& half, const Tensor& t, bool read) {
  if (const HalfNhwcLayout* layout = AsHalfNhwc(t.layout())) {
    CHECK(layout->type() == half.type) << "a 16-bit operand laid out as " << layout->ToString()
                                       << " in a product of the other 16-bit type";
    ComputeOperand own(ctx, std::nullopt, nullptr, t.num_elements());
    own.own_ = ActivationPtr(t);
    return own;
  }
  ComputeOperand copy(ctx, half, DevicePtr(t), t.num_elements());
  copy.nhwc_ = ExtentsOf(t.shape());
  copy.buffer_ = ctx.AllocateBytes(static_cast<size_t>(copy.n_) * kHalfBytes);
  if (read) ToHalfNhwc(copy.fp32_, copy.buffer_->data(), *copy.nhwc_, half.type, ctx.stream());
  return copy;
}

void ComputeOperand::Store() {
  if (!buffer_) return;
  if (nhwc_) {
    FromHalfNhwc(buffer_->data(), fp32_, *nhwc_, half_->type, ctx_.stream());
  } else {
    CastFromHalf(buffer_->data(), fp32_, n_, half_->type, ctx_.stream());
  }
}

}  // namespace pstrain::cuda
