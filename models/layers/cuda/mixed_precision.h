// Mixed precision in the compute-bound CUDA layers (conv2d, dense), with the
// contract of device/device_context.h's Precision: the product's operands
// (inputs, weights, incoming gradients) are rounded to fp16 or bf16, the
// products accumulate in float32 (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16
// configurations, cuBLAS's CUBLAS_COMPUTE_32F) on tensor cores, and every
// tensor between layers, every variable and every gradient stays float32.
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
  void* get() const { return buffer_ ? buffer_->data() : fp32_; }
  // Widens the product's result into the float32 tensor (queued on the
  // context's stream); nothing in float32.
  void Store();

 private:
  CudaContext& ctx_;
  const std::optional<HalfMath> half_;
  float* const fp32_;
  const int64_t n_;
  std::shared_ptr<Buffer> buffer_;  // the 16-bit copy; null in float32
};

}  // namespace pstrain::cuda
