// concat on CUDA: joins any number of inputs along the channel axis (axis 1
// of the batched [N, C_i, ...]; the features of 2-D [N, F_i] inputs). Same
// contract as the CPU layer (cpu/concat.cc): no attributes, no parameters;
// inputs agree in every dim but the channels; output [sum C_i, ...]; the
// gradient of input i is its channel slice of the output's gradient.
//
// Row-major, example n of input i is one contiguous run of C_i * inner floats
// (inner: the product of the dims after the channels) that sits at offset
// n * sum(C) * inner + (C_0 + ... + C_{i-1}) * inner of the output: each input
// is one strided copy (cudaMemcpy2DAsync, N rows), each way.
// The output is plain float32; 16-bit channels-last inputs (HalfNhwcLayout)
// are converted, and their gradients back (plain_fallback.h).
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

class Concat final : public Layer {
 public:
  explicit Concat(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(Shape out, SetupConcat(input_shapes));
    // Floats per example of each input, and of the output.
    example_floats_.clear();
    for (const Shape& s : input_shapes) example_floats_.push_back(NumElements(s));
    out_example_floats_ = NumElements(out);
    return out;
  }

  // Backward reads shapes only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const int64_t batch = CheckedBatch(inputs, output);
    char* out = reinterpret_cast<char*>(DevicePtr(output));
    size_t offset = 0;  // bytes into an output row
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t width = example_floats_[i] * sizeof(float);
      const Tensor input = PlainActivation(ctx, inputs[i]);
      PSTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(out + offset, RowBytes(), DevicePtr(input), width, width, batch,
                                           cudaMemcpyDeviceToDevice, ctx.stream()));
      offset += width;
    }
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    const int64_t batch = CheckedBatch(inputs, grad_output);
    const char* dy = reinterpret_cast<const char*>(DevicePtr(grad_output));
    size_t offset = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t width = example_floats_[i] * sizeof(float);
      if (!grad_inputs[i].empty()) {
        CHECK(grad_inputs[i].shape() == inputs[i].shape())
            << "concat: gradient of input " << i << " is " << ShapeToString(grad_inputs[i].shape());
        PlainGradient dx(ctx, grad_inputs[i]);
        PSTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(DevicePtr(dx.get()), width, dy + offset, RowBytes(), width, batch,
                                             cudaMemcpyDeviceToDevice, ctx.stream()));
        dx.Store();
      }
      offset += width;
    }
  }

 private:
  size_t RowBytes() const { return out_example_floats_ * sizeof(float); }

  // The batch size, after checking the inputs and `out` against Setup()'s shapes.
  int64_t CheckedBatch(absl::Span<const Tensor> inputs, const Tensor& out) const {
    const int64_t batch = out.dim(0);
    CHECK_EQ(inputs.size(), example_floats_.size()) << "concat: input count";
    CHECK_EQ(out.num_elements(), batch * out_example_floats_) << "concat: output " << ShapeToString(out.shape());
    for (size_t i = 0; i < inputs.size(); ++i) {
      CHECK_EQ(inputs[i].num_elements(), batch * example_floats_[i])
          << "concat: input " << i << " " << ShapeToString(inputs[i].shape());
    }
    return batch;
  }

  std::vector<int64_t> example_floats_;
  int64_t out_example_floats_ = 0;
};

PSTRAIN_REGISTER_LAYER("concat", DeviceKind::kCuda, Concat, {});

}  // namespace
}  // namespace pstrain::cuda
