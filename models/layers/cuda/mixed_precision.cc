#include "models/layers/cuda/mixed_precision.h"

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
    : ctx_(ctx), half_(half), fp32_(fp32), n_(n) {
  if (!half_) return;
  buffer_ = ctx.AllocateBytes(static_cast<size_t>(n) * kHalfBytes);
  if (read) CastToHalf(fp32, buffer_->data(), n, half_->type, ctx.stream());
}

void ComputeOperand::Store() {
  if (half_) CastFromHalf(buffer_->data(), fp32_, n_, half_->type, ctx_.stream());
}

}  // namespace pstrain::cuda
