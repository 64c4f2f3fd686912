// cuDNN helpers shared by the CUDA layers: owning descriptor handles, fp32
// NCHW tensor descriptors for batched shapes, and the blend scalars.
//
// Data is float32 (CUDNN_DATA_FLOAT) and plain NCHW unless a helper takes a
// type or a tensor: the compute-bound layers' 16-bit operands of mixed
// precision (mixed_precision.h) and 16-bit channels-last activations
// (HalfNhwcLayout) ask for theirs. cuDNN's legacy API takes int dimensions; the helpers CHECK
// that every dimension fits.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <utility>

#include "common/tensor.h"
#include "device/cuda/cuda_check.h"
#include "device/cuda/half_cast.h"

namespace pstrain::cuda {

// cuDNN computes result = alpha * op(...) + beta * previous; pointers to these
// are the alpha and beta of fp32 calls. kZero as beta overwrites the result.
inline constexpr float kOne = 1.0f;
inline constexpr float kZero = 0.0f;

// Owns one cuDNN descriptor: created by the constructor, destroyed with the
// object. Movable, not copyable.
template <typename Handle, cudnnStatus_t (*kCreate)(Handle*), cudnnStatus_t (*kDestroy)(Handle)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { PSTRAIN_CUDNN_CHECK(kCreate(&handle_)); }
  ~CudnnDescriptor() {
    if (handle_ != nullptr) kDestroy(handle_);
  }
  CudnnDescriptor(CudnnDescriptor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  CudnnDescriptor& operator=(CudnnDescriptor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;

  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor =
    CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActivationDescriptor =
    CudnnDescriptor<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using LrnDescriptor = CudnnDescriptor<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;

// `value` as an int for cuDNN's legacy API (CHECK: 0 <= value <= INT_MAX;
// `what` names it in the failure).
int CudnnDim(int64_t value, const char* what);

// [n] + per_example: the batched shape of a layer's input or output.
Shape Batched(int64_t n, const Shape& per_example);

// An NCHW descriptor of n x c x h x w elements of `type`.
TensorDescriptor NchwDescriptor(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type = CUDNN_DATA_FLOAT);
// A batched shape [N, C, H, W], or [N, C] as N x C x 1 x 1.
TensorDescriptor NchwDescriptor(const Shape& batched, cudnnDataType_t type = CUDNN_DATA_FLOAT);
// Any batched shape [N, ...] as N x (product of the rest) x 1 x 1 of
// `type`: for elementwise operations, which ignore the arrangement.
TensorDescriptor FlatDescriptor(const Shape& batched, cudnnDataType_t type = CUDNN_DATA_FLOAT);

// cuDNN's name for a 16-bit type.
cudnnDataType_t CudnnType(HalfType type);
// The descriptor of a batched activation as it is laid out: plain float32
// NCHW ([N, C, H, W] or [N, C]), or 16-bit channels last
// (HalfNhwcLayout; [N, C, H] as N x C x H x 1).
TensorDescriptor ActivationDescriptor4d(const Shape& batched, const TensorLayoutPtr& layout);
inline TensorDescriptor ActivationDescriptor4d(const Tensor& t) {
  return ActivationDescriptor4d(t.shape(), t.layout());
}
// The element type of a CUDA activation: float32, or its layout's 16 bits.
cudnnDataType_t ElementType(const Tensor& t);

// max(x, 0), NaN propagating (as oneDNN's relu, x > 0 ? x : 0 * x, does).
ActivationDescriptor ReluDescriptor();

}  // namespace pstrain::cuda
