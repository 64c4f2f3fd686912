// dense on CUDA: y = x W + b with cuBLAS in fp32: strict (sgemm, results
// match the CPU layer to float rounding) unless the context's fp32_math()
// is tf32, which runs the products on TF32 tensor cores (cublasGemmEx,
// CUBLAS_COMPUTE_32F_FAST_TF32; PyTorch's matmul.allow_tf32). In bf16
// or fp16 (the context's precision; mixed_precision.h) the three products
// take 16-bit copies of x, W and dy and write float32 (cublasGemmEx,
// CUBLAS_COMPUTE_32F, tensor cores); the bias and its gradient stay fp32.
// An input in 16-bit channels-last activations (HalfNhwcLayout) is converted
// to plain float32 first, and its gradient back (plain_fallback.h).
//
// Same contract as the CPU layer (cpu/dense.cc): attribute "units" (> 0);
// input [N, ...] read as [N, K] with K the product of the per-example dims;
// output [N, units]; parameters "weights" [K, units] row-major (y = x W) and
// "bias" [units]. Parameters are read at every call (the model moves them to
// the device after Setup()).
//
// cuBLAS is column-major: a row-major [R, C] matrix is, in the same memory,
// the column-major C x R matrix (its transpose) with leading dimension C. So
// x is x^T (K x N, ld K), W is W^T (U x K, ld U) and y is y^T (U x N, ld U):
//   forward       y^T  = W^T x^T  gemm(N, N, m=U, n=N, k=K, A=W ld U, B=x ld K, C=y ld U)
//                 y^T += b 1^T    ger(m=U, n=N, x=b, y=ones, A=y ld U)
//   input grad    dx^T = W dy^T   gemm(T, N, m=K, n=N, k=U, A=W ld U, B=dy ld U, C=dx ld K)
//   weights grad  dW^T = dy^T x   gemm(N, T, m=U, n=K, k=N, A=dy ld U, B=x ld K, C=dW ld U)
//   bias grad     db   = dy^T 1   gemv(N, m=U, n=N, A=dy ld U, x=ones, y=db)
// i.e. y = x W + b, dx = dy W^T, dW = x^T dy, db = column sums of dy.
// `ones` is a device vector of 1s as long as the largest batch seen.
#include <climits>
#include <memory>
#include <optional>
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/elementwise.h"
#include "models/layers/cuda/mixed_precision.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

int CheckedInt(int64_t v) {
  CHECK_LE(v, INT_MAX) << "dense: dimension too large for cuBLAS";
  return static_cast<int>(v);
}

class Dense final : public Layer {
 public:
  explicit Dense(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupDense(spec_, input_shapes, &parameters_));
    return setup_.output;
  }

  int64_t ForwardFlopsPerExample() const override { return setup_.ForwardFlopsPerExample(); }

  // Backward reads the input (weight gradients).
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    const int n = BatchOf(inputs[0], output);
    const int k = CheckedInt(setup_.in_features), u = CheckedInt(setup_.units);
    const float one = 1.0f;
    float* y = DevicePtr(output);
    const ComputeOperand w = Operand(ctx, parameters_[0].value), x = Operand(ctx, PlainActivation(ctx, inputs[0]));
    Gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_N, u, n, k, w.get(), u, x.get(), k, y, u);
    PSTRAIN_CUBLAS_CHECK(
        cublasSger(ctx.cublas(), u, n, &one, DevicePtr(parameters_[1].value), 1, Ones(ctx, n), 1, y, u));
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    const int n = BatchOf(inputs[0], grad_output);
    const int k = CheckedInt(setup_.in_features), u = CheckedInt(setup_.units);
    const float one = 1.0f, zero = 0.0f;
    const ComputeOperand dy = Operand(ctx, grad_output);
    if (!grad_inputs[0].empty()) {
      CHECK_EQ(grad_inputs[0].num_elements(), inputs[0].num_elements()) << "dense: input gradient shape";
      const ComputeOperand w = Operand(ctx, parameters_[0].value);
      PlainGradient dx(ctx, grad_inputs[0]);
      Gemm(ctx, CUBLAS_OP_T, CUBLAS_OP_N, k, n, u, w.get(), u, dy.get(), u, DevicePtr(dx.get()), k);
      dx.Store();
    }
    const ComputeOperand x = Operand(ctx, PlainActivation(ctx, inputs[0]));
    Gemm(ctx, CUBLAS_OP_N, CUBLAS_OP_T, u, k, n, dy.get(), u, x.get(), k, DevicePtr(parameters_[0].grad), u);
    PSTRAIN_CUBLAS_CHECK(cublasSgemv(ctx.cublas(), CUBLAS_OP_N, u, n, &one, DevicePtr(grad_output), u, Ones(ctx, n), 1,
                                     &zero, DevicePtr(parameters_[1].grad), 1));
  }

 private:
  // The batch size, after checking that `input` is [N, K] and `out` [N, units].
  int BatchOf(const Tensor& input, const Tensor& out) const {
    const int64_t batch = input.dim(0);
    CHECK_EQ(input.num_elements(), batch * setup_.in_features) << "dense: input " << ShapeToString(input.shape());
    CHECK(out.shape() == (Shape{batch, setup_.units})) << "dense: output " << ShapeToString(out.shape());
    return CheckedInt(batch);
  }

  // `t` (read by a product) in the compute type, fixed at the first call.
  ComputeOperand Operand(CudaContext& ctx, const Tensor& t) {
    if (!precision_known_) {
      half_ = HalfMathOf(ctx);
      tf32_ = !half_ && Tf32Matmuls(ctx.fp32_math());
      precision_known_ = true;
    }
    return ComputeOperand(ctx, half_, DevicePtr(t), t.num_elements(), /*read=*/true);
  }

  // C = A B (column-major, cuBLAS's shapes and transposes) written in
  // float32, from operands in the compute type: sgemm in strict fp32, GemmEx
  // with TF32 products or 16-bit operands, float32 accumulation either way.
  void Gemm(CudaContext& ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
            const void* b, int ldb, float* c, int ldc) const {
    const float one = 1.0f, zero = 0.0f;
    if (tf32_) {
      PSTRAIN_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), ta, tb, m, n, k, &one, a, CUDA_R_32F, lda, b, CUDA_R_32F, ldb,
                                        &zero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
      return;
    }
    if (!half_) {
      PSTRAIN_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), ta, tb, m, n, k, &one, static_cast<const float*>(a), lda,
                                       static_cast<const float*>(b), ldb, &zero, c, ldc));
      return;
    }
    PSTRAIN_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), ta, tb, m, n, k, &one, a, half_->cublas, lda, b, half_->cublas, ldb,
                                      &zero, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // A device vector of at least n ones.
  const float* Ones(CudaContext& ctx, int n) {
    if (n > ones_size_) {
      ones_ = ctx.AllocateBytes(static_cast<size_t>(n) * sizeof(float));
      ones_size_ = n;
      Fill(static_cast<float*>(ones_->data()), 1.0f, n, ctx.stream());
    }
    return static_cast<const float*>(ones_->data());
  }

  const LayerSpec spec_;
  DenseSetup setup_;              // in_features (K) and units
  std::optional<HalfMath> half_;  // the 16-bit compute type; none in fp32
  bool tf32_ = false;             // fp32 products in TF32
  bool precision_known_ = false;
  std::shared_ptr<Buffer> ones_;
  int ones_size_ = 0;
};

PSTRAIN_REGISTER_LAYER("dense", DeviceKind::kCuda, Dense, {.ints = {"units"}});

}  // namespace
}  // namespace pstrain::cuda
