// Mixed precision in the compute-bound CUDA layers (conv2d, dense), with the
// contract of device/device_context.h's Precision: the product's operands
// (inputs, weights, incoming gradients) are rounded to fp16 or bf16, the
// products accumulate in float32 (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16
// configurations, cuBLAS's CUBLAS_COMPUTE_32F) on tensor cores, and every
// tensor between layers, every variable and every gradient stays float32.
//
// With PSTRAIN_CUDA_ACTIVATIONS=half (cuda_context.h) the tensors between
// layers are 16-bit and channels last instead (HalfNhwcLayout); a
// convolution then reads and writes them as they are
// (ComputeOperand::ChannelsLast).
//
// One difference from the CPU layers: cuDNN's convolutions write their
// results (output, input gradient, filter gradient) in the operands' type,
// so those are rounded to 16 bits once more before they are widened into
// the float32 tensors. cuBLAS writes dense's results in float32 directly.
#pragma once

#include <cublas_api.h>
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "common/tensor.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/half_cast.h"
#include "device/cuda/nhwc_index.h"

namespace pstrain::cuda {

// The 16-bit type of a context's precision, as each library names it.
struct HalfMath {
  HalfType type;
  cudnnDataType_t cudnn;  // CUDNN_DATA_HALF or CUDNN_DATA_BFLOAT16
  cudaDataType_t cublas;  // CUDA_R_16F or CUDA_R_16BF
};

// The 16-bit math of ctx's precision(); nullopt for fp32.
std::optional<HalfMath> HalfMathOf(const DeviceContext& ctx);

// One operand of a layer's product, in the layer's compute type. Without
// `half` it is the float32 tensor's own memory and costs nothing. With it, a
// 16-bit buffer from the context's caching allocator (so a training loop
// stops allocating after its first step): a rounded copy of the float32
// data when `read`, otherwise uninitialised, for the product to write and
// Store() to widen into the float32 tensor.
class ComputeOperand {
 public:
  ComputeOperand(CudaContext& ctx, const std::optional<HalfMath>& half, float* fp32, int64_t n, bool read);
  // `t` as an operand in `half`'s type, channels last (the filter layout
  // KRSC for a [K, C, R, S] weight): `t`'s own memory when it is laid out
  // so already (an activation or its gradient; CHECK: of that type);
  // otherwise, for a plain float32 `t` (the images, a weight, a weight's
  // gradient), a 16-bit channels-last buffer as above, rounded and moved
  // channels last when `read`, moved back and widened by Store().
  static ComputeOperand ChannelsLast(CudaContext& ctx, const HalfMath& half, const Tensor& t, bool read);
  void* get() const { return buffer_ ? buffer_->data() : own_; }
  // Widens the product's result into the float32 tensor (queued on the
  // context's stream); nothing when the operand is the tensor's own memory.
  void Store();

 private:
  ComputeOperand(CudaContext& ctx, const std::optional<HalfMath>& half, float* fp32, int64_t n)
      : ctx_(ctx), half_(half), fp32_(fp32), n_(n) {}

  CudaContext& ctx_;
  std::optional<HalfMath> half_;
  float* fp32_ = nullptr;            // the float32 tensor the buffer stands for
  int64_t n_ = 0;                    // its elements
  void* own_ = nullptr;              // the tensor's own memory, used as it is
  std::optional<NchwExtents> nhwc_;  // the buffer is channels last, of these extents
  std::shared_ptr<Buffer> buffer_;   // the 16-bit copy; null when own_ is used
};

}  // namespace pstrain::cuda
