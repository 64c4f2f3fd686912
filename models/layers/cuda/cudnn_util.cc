#include "models/layers/cuda/cudnn_util.h"

#include <limits>

#include "device/cuda/half_nhwc_layout.h"

namespace pstrain::cuda {

int CudnnDim(int64_t value, const char* what) {
  CHECK(value >= 0 && value <= std::numeric_limits<int>::max())
      << what << " " << value << " does not fit cuDNN's int dimensions";
  return static_cast<int>(value);
}

Shape Batched(int64_t n, const Shape& per_example) {
  Shape shape = {n};
  shape.insert(shape.end(), per_example.begin(), per_example.end());
  return shape;
}

TensorDescriptor NchwDescriptor(int64_t n, int64_t c, int64_t h, int64_t w, cudnnDataType_t type) {
  TensorDescriptor desc;
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), CUDNN_TENSOR_NCHW, type, CudnnDim(n, "batch"),
                                                 CudnnDim(c, "channels"), CudnnDim(h, "height"), CudnnDim(w, "width")));
  return desc;
}

TensorDescriptor NchwDescriptor(const Shape& batched, cudnnDataType_t type) {
  CHECK(batched.size() == 4 || batched.size() == 2)
      << "expected [N, C, H, W] or [N, C], got " << ShapeToString(batched);
  if (batched.size() == 2) return NchwDescriptor(batched[0], batched[1], 1, 1, type);
  return NchwDescriptor(batched[0], batched[1], batched[2], batched[3], type);
}

TensorDescriptor FlatDescriptor(const Shape& batched, cudnnDataType_t type) {
  CHECK(!batched.empty()) << "expected a batched shape [N, ...]";
  const Shape per_example(batched.begin() + 1, batched.end());
  return NchwDescriptor(batched[0], NumElements(per_example), 1, 1, type);
}

cudnnDataType_t CudnnType(HalfType type) { return type == HalfType::kBf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF; }

cudnnDataType_t ElementType(const Tensor& t) {
  const HalfNhwcLayout* half = AsHalfNhwc(t.layout());
  return half ? CudnnType(half->type()) : CUDNN_DATA_FLOAT;
}

TensorDescriptor ActivationDescriptor4d(const Shape& s, const TensorLayoutPtr& layout) {
  const HalfNhwcLayout* half = AsHalfNhwc(layout);
  if (half == nullptr) return NchwDescriptor(s);
  const int64_t h = s.size() > 2 ? s[2] : 1, w = s.size() > 3 ? s[3] : 1;
  TensorDescriptor desc;
  PSTRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc.get(), CUDNN_TENSOR_NHWC, CudnnType(half->type()),
                                                 CudnnDim(s[0], "batch"), CudnnDim(s[1], "channels"),
                                                 CudnnDim(h, "height"), CudnnDim(w, "width")));
  return desc;
}

ActivationDescriptor ReluDescriptor() {
  ActivationDescriptor desc;
  PSTRAIN_CUDNN_CHECK(
      cudnnSetActivationDescriptor(desc.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, /*coef=*/0.0));
  return desc;
}

}  // namespace pstrain::cuda
