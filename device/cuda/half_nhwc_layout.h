// HalfNhwcLayout: the arrangement of the 16-bit activations CUDA layers pass
// between themselves in bf16 or fp16 training (PSTRAIN_CUDA_ACTIVATIONS,
// cuda_context.h): elements of the 16-bit type, channels last (NHWC, as
// cuDNN's fastest tensor-core kernels and PyTorch's channels_last keep
// them). A tensor so laid out has its logical shape ([N, C, H, W], or
// [N, C]) and half the bytes of a plain float32 one; nhwc_index.h says
// where each element lies. Everything else (variables, gradients of
// variables, the model's inputs and logits) stays plain float32.
#pragma once

#include <memory>
#include <string>

#include "common/tensor.h"
#include "device/cuda/half_cast.h"
#include "device/cuda/nhwc_index.h"

namespace pstrain::cuda {

class HalfNhwcLayout final : public TensorLayout {
 public:
  // `shape`: the tensor's batched logical shape, rank 2 to 4.
  HalfNhwcLayout(const Shape& shape, HalfType type);

  size_t num_bytes() const override { return static_cast<size_t>(extents_.count()) * kHalfBytes; }
  bool Equals(const TensorLayout& other) const override;
  // "nhwc bf16 [64,256,56,56]"
  std::string ToString() const override;

  HalfType type() const { return type_; }
  const NchwExtents& extents() const { return extents_; }

 private:
  Shape shape_;
  HalfType type_;
  NchwExtents extents_;
};

// A layout for a tensor of `shape` (rank 2 to 4; CHECK) in `type`.
TensorLayoutPtr MakeHalfNhwcLayout(const Shape& shape, HalfType type);
// `layout` as a HalfNhwcLayout; null when it is plain or another layout.
const HalfNhwcLayout* AsHalfNhwc(const TensorLayoutPtr& layout);
// The extents of a plain or laid-out tensor shaped [N, C, ...] (rank 2 to
// 4; CHECK): N, C and the product of the rest.
NchwExtents ExtentsOf(const Shape& shape);

}  // namespace pstrain::cuda
