// batch_norm: batch normalisation over the channel axis (axis 1 of [N, C, H, W]
// or [N, C]) on oneDNN, y = gamma * (x - mean) / sqrt(var + epsilon) + beta.
//
// Attributes: "epsilon" (default 1e-3, TensorFlow's), "momentum" (the decay of
// the running averages, default 0.9). Input [C, H, W] or [C]; output alike.
// Parameters: "gamma" [C] (ones), "beta" [C] (zeros).
//
// Training (Forward(training=true)) normalises with the batch's statistics
// (biased variance) and updates the running averages,
//   running = momentum * running + (1 - momentum) * batch,
// with the batch variance Bessel-corrected (x m/(m-1), m = N*H*W) for the
// running variance, as PyTorch and TensorFlow's fused batch norm do.
// Inference uses the running averages (initially mean 0, variance 1). They are
// layer state, not Parameters: each replica keeps its own and they are not
// exchanged with parameter servers.
//
// Fusion: accepts a following relu (Layer::Fuse), computing relu(bn(x)) with
// oneDNN's fuse_norm_relu (a bit mask of the relu in a workspace).
//
// Layouts: works in the input's format (blocked or plain); output likewise.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;
const auto kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupBatchNorm(spec_, input_shapes, &parameters_));
    running_mean_ = Tensor({setup_.channels});
    running_var_ = Tensor({setup_.channels});
    for (float& v : running_var_.span()) v = 1.0f;
    return setup_.shape;
  }

  bool Fuse(const LayerSpec& next) override {
    if (next.type != "relu" || !cache_.empty()) return false;
    fuse_relu_ = true;
    return true;
  }

  // The output keeps the input's format.
  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return inputs[0].layout();
  }

  // Backward reads the input; a fused relu's mask is in the workspace.
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    ThreadCap cap(1);  // creation too: see Work::kOneThread
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, View(p.data, ctx, inputs[0])},
                                            {DNNL_ARG_DST, CheckedView(p.data, ctx, output)},
                                            {DNNL_ARG_SCALE, View(ctx, parameters_[0].value)},
                                            {DNNL_ARG_SHIFT, View(ctx, parameters_[1].value)}};
    if (!training) {
      if (!p.inference) {
        dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, p.data, setup_.epsilon,
                                                  Flags() | dnnl::normalization_flags::use_global_stats);
        p.inference = MakePrim(dnnl::batch_normalization_forward::primitive_desc(d, ScratchpadAttr(), ctx.engine()),
                               Work::kOneThread);
      }
      args.emplace(DNNL_ARG_MEAN, View(ctx, running_mean_));
      args.emplace(DNNL_ARG_VARIANCE, View(ctx, running_var_));
      Run(ctx, *p.inference, std::move(args));
      return;
    }
    args.emplace(DNNL_ARG_MEAN, View(ctx, p.mean));
    args.emplace(DNNL_ARG_VARIANCE, View(ctx, p.variance));
    if (fuse_relu_) args.emplace(DNNL_ARG_WORKSPACE, View(p.training_pd.workspace_desc(), ctx, p.workspace));
    Run(ctx, p.training, std::move(args));
    // Running averages.
    const int64_t m = inputs[0].dim(0) * setup_.spatial;
    const float bessel = m > 1 ? static_cast<float>(m) / static_cast<float>(m - 1) : 1.0f;
    const float* mean = p.mean.data();
    const float* var = p.variance.data();
    float* rm = running_mean_.data();
    float* rv = running_var_.data();
    for (int64_t c = 0; c < setup_.channels; ++c) {
      rm[c] = setup_.momentum * rm[c] + (1 - setup_.momentum) * mean[c];
      rv[c] = setup_.momentum * rv[c] + (1 - setup_.momentum) * var[c] * bessel;
    }
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    ThreadCap cap(1);  // creation too: see Work::kOneThread
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.backward) {
      dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, p.data, p.data, setup_.epsilon, Flags());
      p.backward =
          MakePrim(dnnl::batch_normalization_backward::primitive_desc(d, ScratchpadAttr(), ctx.engine(), p.training_pd),
                   Work::kOneThread);
    }
    // oneDNN always writes diff_src; an unwanted one goes to a scratch tensor.
    if (grad_inputs[0].empty() && p.unwanted_diff_src.empty())
      p.unwanted_diff_src = Tensor(inputs[0].shape(), inputs[0].layout());
    const Tensor& diff_src = grad_inputs[0].empty() ? p.unwanted_diff_src : grad_inputs[0];
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, View(p.data, ctx, inputs[0])},
        {DNNL_ARG_MEAN, View(ctx, p.mean)},
        {DNNL_ARG_VARIANCE, View(ctx, p.variance)},
        {DNNL_ARG_DIFF_DST, CheckedView(p.data, ctx, grad_output)},
        {DNNL_ARG_SCALE, View(ctx, parameters_[0].value)},
        {DNNL_ARG_SHIFT, View(ctx, parameters_[1].value)},  // oneDNN 2.6 asks for it
        {DNNL_ARG_DIFF_SRC, CheckedView(p.data, ctx, diff_src)},
        {DNNL_ARG_DIFF_SCALE, View(ctx, parameters_[0].grad)},
        {DNNL_ARG_DIFF_SHIFT, View(ctx, parameters_[1].grad)}};
    if (fuse_relu_) args.emplace(DNNL_ARG_WORKSPACE, View(p.training_pd.workspace_desc(), ctx, p.workspace));
    Run(ctx, *p.backward, std::move(args));
  }

 private:
  // Primitives for one input descriptor; inference and backward made on first use.
  struct Prims {
    memory::desc data;  // the key: input, output and their gradients
    dnnl::batch_normalization_forward::primitive_desc training_pd;
    Prim training;
    std::optional<Prim> inference, backward;
    Tensor mean, variance;     // the last training batch's statistics, for Backward()
    Tensor unwanted_diff_src;  // when the input's gradient is not wanted
    Tensor workspace;          // fused relu: where the training output was positive
  };

  dnnl::normalization_flags Flags() const {
    return fuse_relu_ ? kScaleShift | dnnl::normalization_flags::fuse_norm_relu : kScaleShift;
  }

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc data = DescOf(input);
    for (auto& p : cache_) {
      if (p->data == data) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->data = data;
    dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_training, data, setup_.epsilon, Flags());
    p->training_pd = dnnl::batch_normalization_forward::primitive_desc(d, ScratchpadAttr(), ctx.engine());
    CHECK(p->training_pd.dst_desc() == data) << "batch_norm: oneDNN changed the data format";
    const size_t ws = p->training_pd.workspace_desc().get_size();
    if (ws > 0) p->workspace = Tensor({static_cast<int64_t>((ws + 3) / 4)});
    p->training = MakePrim(p->training_pd, Work::kOneThread);
    p->mean = Tensor({setup_.channels});
    p->variance = Tensor({setup_.channels});
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  const LayerSpec spec_;
  BatchNormSetup setup_;  // attributes and per-example shape
  bool fuse_relu_ = false;
  Tensor running_mean_, running_var_;
  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("batch_norm", DeviceKind::kCpu, BatchNorm, {.floats = {"epsilon", "momentum"}});

}  // namespace
}  // namespace pstrain::cpu
