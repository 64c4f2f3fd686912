// conv2d on CUDA: 2-D convolution (cross-correlation) on cuDNN, forward and
// both backward passes; attributes, validation, parameters and FLOPs are the
// CPU layer's (SetupConv2d in layer_rules.h):
//   "filters" (required), "kernel" [kh, kw] (required), "stride" (default
//   [1, 1]), "padding" [ph, pw] symmetric (default [0, 0]), "groups" (default
//   1), "bias" 1/0 (default 1). Input [C, H, W] -> [filters, OH, OW].
//   Parameters: "weights" [filters, C/groups, kh, kw] (HeNormal), "bias"
//   [filters] (zeros) when bias=1. The weights are cuDNN's KCRS filter as
//   they are (grouped: cudnnSetConvolutionGroupCount).
//
// Numerics in fp32 (the context's precision) follow the context's
// fp32_math(): strict runs CUDNN_FMA_MATH kernels only, whose results differ
// from the CPU's by summation order only; TF32 (tf32_convolutions or tf32,
// PyTorch's default for convolutions) lets cuDNN choose TF32 tensor-core
// kernels (inputs rounded to a 10-bit mantissa, float32 accumulation).
// Some backward algorithms sum with atomics and are not bitwise
// reproducible from run to run.
// In bf16 or fp16 (mixed_precision.h): the three products run on 16-bit
// copies of their operands with float32 accumulation and tensor-op math;
// their results are widened into the float32 tensors. The bias and its
// gradient stay float32. With 16-bit activations (PSTRAIN_CUDA_ACTIVATIONS=
// half, cuda_context.h), a convolution without bias runs channels last:
// its output and input gradient are 16-bit NHWC tensors (HalfNhwcLayout)
// that the products write directly, an input in that layout is read as it
// is (a plain one, the images, is converted), and the weights go through a
// 16-bit KRSC copy each way. A convolution with bias keeps plain float32
// outputs, converting 16-bit inputs first.
//
// Algorithms are chosen once per batched input shape: for each pass, the
// first of a ranking (fastest first) that is supported, uses tensor-op math
// only where allowed (16-bit products, TF32) and fits the workspace limit;
// the pass then runs with the math type cuDNN ranked it with (strict fp32:
// always CUDNN_FMA_MATH). The ranking comes from
// PSTRAIN_CUDNN_ALGORITHMS (read once per process):
//   measured (default)   cudnnFind*Ex: every candidate that fits in the
//                        workspace limit (below) is run on the layer's own buffers at
//                        its first forward (backward) of that shape, like
//                        PyTorch's cudnn.benchmark. The results overwrite
//                        only what that pass writes next anyway. ResNet-50
//                        batch 64 on an H200: 872 images/sec against 823
//                        with the heuristic (docs/GPU.md);
//   heuristic            cuDNN's heuristics (cudnnGet*Algorithm_v7): no GPU
//                        time, made when the shape is first seen.
// The workspace is the context's shared one; no algorithm (and no measuring)
// takes more than PSTRAIN_CUDNN_WORKSPACE_MIB of it (read once per process;
// default: 4096, or an eighth of the GPU's memory when that is less).
// Measuring a pass gets only as much as its largest candidate needs within
// that limit (cuDNN's own figure for each algorithm), so a layer whose
// algorithms need little does not hold the whole limit at its first step. On an
// H200, VGG16 batch 64 trains at 781 images/sec with 4096 MiB against 348
// with 256: the fast algorithms of its wide early layers need GiBs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "device/cuda/cuda_context.h"
#include "device/cuda/half_nhwc_layout.h"
#include "models/layers/cuda/cudnn_util.h"
#include "models/layers/cuda/mixed_precision.h"
#include "models/layers/cuda/plain_fallback.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cuda {
namespace {

constexpr int64_t kDefaultWorkspaceMib = 4096;

// PSTRAIN_CUDNN_WORKSPACE_MIB, read once; a value that is not a positive
// whole number stops the process naming the variable.
size_t WorkspaceLimitBytes() {
  static const size_t bytes = [] {
    const char* value = std::getenv("PSTRAIN_CUDNN_WORKSPACE_MIB");
    size_t free_bytes = 0, total_bytes = 0;
    PSTRAIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    int64_t mib = std::min<int64_t>(kDefaultWorkspaceMib, static_cast<int64_t>(total_bytes >> 20) / 8);
    if (value != nullptr && *value != '\0' && (!absl::SimpleAtoi(value, &mib) || mib <= 0)) {
      LOG(FATAL) << "PSTRAIN_CUDNN_WORKSPACE_MIB must be a positive whole number of MiB, got '" << value << "'";
    }
    return static_cast<size_t>(mib) << 20;
  }();
  return bytes;
}

enum class AlgorithmChoice { kHeuristic, kMeasured };

// PSTRAIN_CUDNN_ALGORITHMS, read once; another value stops the process
// naming the variable and what it accepts.
AlgorithmChoice AlgorithmChoiceFromEnvironment() {
  static const AlgorithmChoice choice = [] {
    const char* value = std::getenv("PSTRAIN_CUDNN_ALGORITHMS");
    const std::string v = value == nullptr ? "" : value;
    if (v.empty() || v == "measured") return AlgorithmChoice::kMeasured;
    if (v == "heuristic") return AlgorithmChoice::kHeuristic;
    LOG(FATAL) << "PSTRAIN_CUDNN_ALGORITHMS must be heuristic or measured, got '" << v << "'";
  }();
  return choice;
}

// The first of `ranked` (cuDNN's ranking, fastest first) that can run
// here: supported, workspace within the cap, and no tensor-op math unless
// `tensor_ops` (the 16-bit products of mixed precision, and TF32).
// Perf is one of cuDNN's cudnnConvolution*AlgoPerf_t.
template <typename Perf>
Perf ChooseAlgorithm(const std::vector<Perf>& ranked, const char* pass, bool tensor_ops) {
  for (const Perf& p : ranked) {
    const bool uses_tensor_ops =
        p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (p.status == CUDNN_STATUS_SUCCESS && (tensor_ops || !uses_tensor_ops) && p.memory <= WorkspaceLimitBytes()) {
      return p;
    }
  }
  LOG(FATAL) << "conv2d: cuDNN offers no " << (tensor_ops ? "tensor-op" : "strict fp32") << " " << pass
             << " algorithm within " << WorkspaceLimitBytes() << " bytes of workspace";
}

// The workspace to measure a pass's algorithms with: the most any of
// `ranked` (cuDNN's heuristic list, each with the workspace it needs) needs
// within the limit. Measuring with less leaves out the same algorithms the
// limit does and no others.
template <typename Perf>
size_t SearchWorkspaceBytes(const std::vector<Perf>& ranked) {
  size_t bytes = 0;
  for (const Perf& p : ranked) {
    if (p.memory <= WorkspaceLimitBytes()) bytes = std::max(bytes, p.memory);
  }
  return bytes;
}

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupConv2d(spec_, input_shapes, &parameters_));
    return setup_.output;
  }

  int64_t ForwardFlopsPerExample() const override { return setup_.ForwardFlopsPerExample(); }

  // Backward reads the input (filter gradients).
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  TensorLayoutPtr OutputLayout(DeviceContext& dctx, absl::Span<const Tensor> inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    if (!conv_) CreateDescriptors(ctx);
    return nhwc_ ? ctx.ActivationLayout(Batched(inputs[0].dim(0), setup_.output)) : nullptr;
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CudaContext& ctx = AsCuda(dctx);
    Plan& p = PlanFor(ctx, inputs[0].shape());
    CHECK(output.shape() == Batched(inputs[0].dim(0), setup_.output))
        << "conv2d output " << ShapeToString(output.shape());
    const Tensor input = nhwc_ ? inputs[0] : PlainActivation(ctx, inputs[0]);
    ComputeOperand x = Operand(ctx, input, /*read=*/true), w = Operand(ctx, parameters_[0].value, true);
    ComputeOperand y = Operand(ctx, output, /*read=*/false);
    if (p.measure_forward) MeasureForward(ctx, p, x.get(), w.get(), y.get());
    UseMath(p.forward_math);
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn(), &kOne, p.input.get(), x.get(), filter_->get(), w.get(),
                                                conv_->get(), p.forward, Workspace(ctx, p.forward_bytes),
                                                p.forward_bytes, &kZero, p.output.get(), y.get()));
    y.Store();
    if (setup_.has_bias) {
      // y += bias, broadcast over N, H, W.
      PSTRAIN_CUDNN_CHECK(cudnnAddTensor(ctx.cudnn(), &kOne, bias_->get(), DevicePtr(parameters_[1].value), &kOne,
                                         p.output_fp32.get(), DevicePtr(output)));
    }
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CudaContext& ctx = AsCuda(dctx);
    Plan& p = PlanFor(ctx, inputs[0].shape());
    CHECK(grad_output.shape() == output.shape()) << "conv2d grad_output " << ShapeToString(grad_output.shape());
    const ComputeOperand dy = Operand(ctx, grad_output, /*read=*/true);
    if (!grad_inputs[0].empty()) {
      CHECK(grad_inputs[0].shape() == inputs[0].shape())
          << "conv2d grad_input " << ShapeToString(grad_inputs[0].shape());
      const ComputeOperand w = Operand(ctx, parameters_[0].value, /*read=*/true);
      PlainGradient plain_dx(ctx, nhwc_ ? Tensor() : grad_inputs[0]);
      ComputeOperand dx = Operand(ctx, nhwc_ ? grad_inputs[0] : plain_dx.get(), /*read=*/false);
      if (p.measure_backward_data) MeasureBackwardData(ctx, p, w.get(), dy.get(), dx.get());
      UseMath(p.backward_data_math);
      PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
          ctx.cudnn(), &kOne, filter_->get(), w.get(), p.output.get(), dy.get(), conv_->get(), p.backward_data,
          Workspace(ctx, p.backward_data_bytes), p.backward_data_bytes, &kZero, p.input.get(), dx.get()));
      dx.Store();
      plain_dx.Store();
    }
    const Tensor input = nhwc_ ? inputs[0] : PlainActivation(ctx, inputs[0]);
    const ComputeOperand x = Operand(ctx, input, /*read=*/true);
    ComputeOperand dw = Operand(ctx, parameters_[0].grad, /*read=*/false);
    if (p.measure_backward_filter) MeasureBackwardFilter(ctx, p, x.get(), dy.get(), dw.get());
    UseMath(p.backward_filter_math);
    PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        ctx.cudnn(), &kOne, p.input.get(), x.get(), p.output.get(), dy.get(), conv_->get(), p.backward_filter,
        Workspace(ctx, p.backward_filter_bytes), p.backward_filter_bytes, &kZero, filter_->get(), dw.get()));
    dw.Store();
    if (setup_.has_bias) {
      PSTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx.cudnn(), &kOne, p.output_fp32.get(), DevicePtr(grad_output),
                                                       &kZero, bias_->get(), DevicePtr(parameters_[1].grad)));
    }
  }

 private:
  // Descriptors and algorithms for one batched input shape.
  struct Plan {
    TensorDescriptor input, output;  // in the compute type; also those of their gradients
    TensorDescriptor output_fp32;    // the float32 output tensor (bias and its gradient)
    cudnnConvolutionFwdAlgo_t forward{};
    cudnnConvolutionBwdDataAlgo_t backward_data{};
    cudnnConvolutionBwdFilterAlgo_t backward_filter{};
    size_t forward_bytes = 0, backward_data_bytes = 0, backward_filter_bytes = 0;  // workspace
    // The math type each pass runs with (the convolution descriptor's, set
    // before each call).
    cudnnMathType_t forward_math = CUDNN_FMA_MATH, backward_data_math = CUDNN_FMA_MATH,
                    backward_filter_math = CUDNN_FMA_MATH;
    // Measured choice: the passes still to be measured (on first use), and
    // the workspace each is measured with (SearchWorkspaceBytes).
    bool measure_forward = false, measure_backward_data = false, measure_backward_filter = false;
    size_t forward_search_bytes = 0, backward_data_search_bytes = 0, backward_filter_search_bytes = 0;
  };

  // The measured choice of each pass, on the buffers it is about to write
  // anyway; replaces the heuristic one made by PlanFor.
  void MeasureForward(CudaContext& ctx, Plan& p, const void* x, const void* w, void* y) {
    int max_count = 0, count = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> ranked(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        ctx.cudnn(), p.input.get(), x, filter_->get(), w, conv_->get(), p.output.get(), y, max_count, &count,
        ranked.data(), Workspace(ctx, p.forward_search_bytes), p.forward_search_bytes));
    ranked.resize(count);
    Take(ChooseAlgorithm(ranked, "forward", TensorOps()), &p.forward, &p.forward_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        ctx.cudnn(), p.input.get(), filter_->get(), conv_->get(), p.output.get(), p.forward, &p.forward_bytes));
    p.measure_forward = false;
  }

  void MeasureBackwardData(CudaContext& ctx, Plan& p, const void* w, const void* dy, void* dx) {
    int max_count = 0, count = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> ranked(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        ctx.cudnn(), filter_->get(), w, p.output.get(), dy, conv_->get(), p.input.get(), dx, max_count, &count,
        ranked.data(), Workspace(ctx, p.backward_data_search_bytes), p.backward_data_search_bytes));
    ranked.resize(count);
    Take(ChooseAlgorithm(ranked, "backward-data", TensorOps()), &p.backward_data, &p.backward_data_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), filter_->get(), p.output.get(),
                                                                     conv_->get(), p.input.get(), p.backward_data,
                                                                     &p.backward_data_bytes));
    p.measure_backward_data = false;
  }

  void MeasureBackwardFilter(CudaContext& ctx, Plan& p, const void* x, const void* dy, void* dw) {
    int max_count = 0, count = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn(), &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> ranked(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        ctx.cudnn(), p.input.get(), x, p.output.get(), dy, conv_->get(), filter_->get(), dw, max_count, &count,
        ranked.data(), Workspace(ctx, p.backward_filter_search_bytes), p.backward_filter_search_bytes));
    ranked.resize(count);
    Take(ChooseAlgorithm(ranked, "backward-filter", TensorOps()), &p.backward_filter, &p.backward_filter_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn(), p.input.get(), p.output.get(),
                                                                       conv_->get(), filter_->get(), p.backward_filter,
                                                                       &p.backward_filter_bytes));
    p.measure_backward_filter = false;
  }

  // Whether the products may run on tensor cores: 16-bit, or TF32 allowed.
  bool TensorOps() const { return half_.has_value() || tf32_; }

  // The descriptor's math type while cuDNN ranks algorithms: tensor ops for
  // 16-bit products, cuDNN's default (TF32 allowed on Ampere and later) for
  // TF32, FMA kernels only for strict fp32.
  cudnnMathType_t SearchMath() const {
    if (half_) return CUDNN_TENSOR_OP_MATH;
    return tf32_ ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }

  void UseMath(cudnnMathType_t math) { PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_->get(), math)); }

  // A pass takes the chosen algorithm and the math type it was ranked with,
  // after which its workspace size is asked for under that math type.
  template <typename Perf, typename Algo>
  void Take(const Perf& chosen, Algo* algo, cudnnMathType_t* math) {
    *algo = chosen.algo;
    *math = TensorOps() ? chosen.mathType : CUDNN_FMA_MATH;
    UseMath(*math);
  }

  static void* Workspace(CudaContext& ctx, size_t bytes) { return bytes == 0 ? nullptr : ctx.Workspace(bytes); }

  // `t` as an operand of the products, in the compute type and, with
  // 16-bit activations, channels last.
  ComputeOperand Operand(CudaContext& ctx, const Tensor& t, bool read) const {
    if (nhwc_) return ComputeOperand::ChannelsLast(ctx, *half_, t, read);
    return ComputeOperand(ctx, half_, DevicePtr(t), t.num_elements(), read);
  }

  // A batched activation's descriptor in the compute type and arrangement.
  TensorDescriptor DataDescriptor(const Shape& batched) const {
    if (nhwc_) return ActivationDescriptor4d(batched, MakeHalfNhwcLayout(batched, half_->type));
    return NchwDescriptor(batched, DataType());
  }

  // The compute type's name for cuDNN.
  cudnnDataType_t DataType() const { return half_ ? half_->cudnn : CUDNN_DATA_FLOAT; }

  // The shape-independent descriptors, made with the first plan, in the
  // context's precision (fixed from then on).
  void CreateDescriptors(const CudaContext& ctx) {
    half_ = HalfMathOf(ctx);
    tf32_ = !half_ && Tf32Convolutions(ctx.fp32_math());
    nhwc_ = half_ && !setup_.has_bias && ctx.ActivationLayout(Batched(1, setup_.output)) != nullptr;
    const Window2d& w = setup_.window;
    filter_.emplace();
    PSTRAIN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(
        filter_->get(), DataType(), nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, CudnnDim(setup_.filters, "filters"),
        CudnnDim(setup_.InputChannelsPerGroup(), "channels per group"), CudnnDim(w.kh, "kernel"),
        CudnnDim(w.kw, "kernel")));
    conv_.emplace();
    PSTRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv_->get(), CudnnDim(w.ph, "padding"), CudnnDim(w.pw, "padding"), CudnnDim(w.sh, "stride"),
        CudnnDim(w.sw, "stride"), /*dilation_h=*/1, /*dilation_w=*/1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    PSTRAIN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_->get(), CudnnDim(setup_.groups, "groups")));
    // Each pass sets its own math type before its calls (Take, UseMath).
    UseMath(SearchMath());
    if (setup_.has_bias) bias_.emplace(NchwDescriptor(1, setup_.filters, 1, 1));
  }

  Plan& PlanFor(CudaContext& ctx, const Shape& input) {
    auto it = cache_.find(input);
    if (it != cache_.end()) return it->second;
    CHECK(input == Batched(input.at(0), setup_.input))
        << "conv2d set up for " << ShapeToString(setup_.input) << " got input " << ShapeToString(input);
    if (!conv_) CreateDescriptors(ctx);
    Plan p;
    p.input = DataDescriptor(input);
    const Shape output = Batched(input[0], setup_.output);
    p.output = DataDescriptor(output);
    p.output_fp32 = NchwDescriptor(output);
    int n = 0, c = 0, h = 0, w = 0;
    PSTRAIN_CUDNN_CHECK(
        cudnnGetConvolution2dForwardOutputDim(conv_->get(), p.input.get(), filter_->get(), &n, &c, &h, &w));
    CHECK(Shape({n, c, h, w}) == output) << "conv2d: cuDNN's output [" << n << "," << c << "," << h << "," << w
                                         << "] differs from " << ShapeToString(output);

    cudnnHandle_t cudnn = ctx.cudnn();
    int max_count = 0, count = 0;
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> forward(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(cudnn, p.input.get(), filter_->get(), conv_->get(),
                                                               p.output.get(), max_count, &count, forward.data()));
    forward.resize(count);
    p.forward_search_bytes = SearchWorkspaceBytes(forward);
    Take(ChooseAlgorithm(forward, "forward", TensorOps()), &p.forward, &p.forward_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(cudnn, p.input.get(), filter_->get(), conv_->get(),
                                                                p.output.get(), p.forward, &p.forward_bytes));

    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn, filter_->get(), p.output.get(), conv_->get(),
                                                                    p.input.get(), max_count, &count, data.data()));
    data.resize(count);
    p.backward_data_search_bytes = SearchWorkspaceBytes(data);
    Take(ChooseAlgorithm(data, "backward-data", TensorOps()), &p.backward_data, &p.backward_data_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        cudnn, filter_->get(), p.output.get(), conv_->get(), p.input.get(), p.backward_data, &p.backward_data_bytes));

    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(max_count);
    UseMath(SearchMath());
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        cudnn, p.input.get(), p.output.get(), conv_->get(), filter_->get(), max_count, &count, filter.data()));
    filter.resize(count);
    p.backward_filter_search_bytes = SearchWorkspaceBytes(filter);
    Take(ChooseAlgorithm(filter, "backward-filter", TensorOps()), &p.backward_filter, &p.backward_filter_math);
    PSTRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn, p.input.get(), p.output.get(),
                                                                       conv_->get(), filter_->get(), p.backward_filter,
                                                                       &p.backward_filter_bytes));
    const bool measured = AlgorithmChoiceFromEnvironment() == AlgorithmChoice::kMeasured;
    p.measure_forward = p.measure_backward_data = p.measure_backward_filter = measured;
    return cache_.emplace(input, std::move(p)).first->second;
  }

  const LayerSpec spec_;
  Conv2dSetup setup_;                          // attributes and per-example shapes
  std::optional<FilterDescriptor> filter_;     // [filters, C/groups, kh, kw], KCRS or (nhwc_) KRSC
  std::optional<ConvolutionDescriptor> conv_;  // padding, stride, groups, math type
  std::optional<TensorDescriptor> bias_;       // 1 x filters x 1 x 1, float32
  std::optional<HalfMath> half_;               // the 16-bit compute type; none in fp32
  bool tf32_ = false;                          // fp32 products may run in TF32
  bool nhwc_ = false;                          // 16-bit channels-last activations
  std::map<Shape, Plan> cache_;                // by batched input shape
};

PSTRAIN_REGISTER_LAYER("conv2d", DeviceKind::kCuda, Conv2d,
                       {.ints = {"filters", "kernel", "stride", "padding", "groups", "bias"}});

}  // namespace
}  // namespace pstrain::cuda
