#include "models/layers/cuda/cudnn_util.h"

#include <limits>

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

TensorDescriptor FlatDescriptor(const Shape& batched) {
  CHECK(!batched.empty()) << "expected a batched shape [N, ...]";
  const Shape per_example(batched.begin() + 1, batched.end());
  return NchwDescriptor(batched[0], NumElements(per_example), 1, 1);
}

ActivationDescriptor ReluDescriptor() {
  ActivationDescriptor desc;
  PSTRAIN_CUDNN_CHECK(
      cudnnSetActivationDescriptor(desc.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, /*coef=*/0.0));
  return desc;
}

}  // namespace pstrain::cuda
