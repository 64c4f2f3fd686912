// flatten on CUDA: [N, d1, d2, ...] -> [N, d1*d2*...] in row-major order.
// Same contract as the CPU layer (cpu/flatten.cc): no attributes, no
// parameters; the output is its own buffer, plain float32. From a plain
// input both passes are one device-to-device copy; from a 16-bit
// channels-last one (HalfNhwcLayout) one conversion each way.
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

// dst = src, reshaped: one of them is plain float32 and viewed in the
// other's shape.
void CopyOnDevice(CudaContext& ctx, const Tensor& src, const Tensor& dst) {
  CHECK_EQ(src.num_elements(), dst.num_elements())
      << "flatten: " << ShapeToString(src.shape()) << " vs " << ShapeToString(dst.shape());
  if (src.is_plain()) {
    ctx.Convert(Tensor(dst.shape(), DType::kFloat32, src.buffer(), src.device()), dst);
  } else {
    ctx.Convert(src, Tensor(src.shape(), DType::kFloat32, dst.buffer(), dst.device()));
  }
}

class Flatten final : public Layer {
 public:
  explicit Flatten(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupFlatten(input_shapes); }

  // Backward reads nothing.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CopyOnDevice(AsCuda(ctx), inputs[0], output);
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (!grad_inputs[0].empty()) CopyOnDevice(AsCuda(ctx), grad_output, grad_inputs[0]);
  }
};

PSTRAIN_REGISTER_LAYER("flatten", DeviceKind::kCuda, Flatten, {});

}  // namespace
}  // namespace pstrain::cuda
