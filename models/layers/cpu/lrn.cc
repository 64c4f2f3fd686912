// lrn: local response normalisation across channels (AlexNet) on oneDNN,
//   y[c] = x[c] / (k + alpha / size * sum_{c' in window(c)} x[c']^2)^beta,
// the window being `size` channels centred on c (clipped at the ends).
// Note alpha is divided by size: the Caffe, oneDNN and cuDNN convention
// (TensorFlow's tf.nn.lrn does not divide; pass alpha * size for its values).
//
// Attributes: "size" (default 5), "alpha" (1e-4), "beta" (0.75), "k" (default
// 1.0; AlexNet uses 2.0). Input [C, H, W]; output alike. No parameters.
// Layouts: works in the input's format; output likewise.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Lrn final : public Layer {
 public:
  explicit Lrn(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupLrn(spec_, input_shapes));
    return setup_.shape;
  }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs[0]).dst);
  }

  // Backward reads the input.
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, View(p.src, ctx, inputs[0])},
                                            {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}};
    if (!p.workspace.empty()) args.emplace(DNNL_ARG_WORKSPACE, View(p.fwd_pd.workspace_desc(), ctx, p.workspace));
    Run(ctx, p.fwd, std::move(args));
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.bwd) {
      dnnl::lrn_backward::desc d(dnnl::algorithm::lrn_across_channels, p.src, p.dst, setup_.size, setup_.alpha,
                                 setup_.beta, setup_.k);
      p.bwd = MakePrim(dnnl::lrn_backward::primitive_desc(d, ScratchpadAttr(), ctx.engine(), p.fwd_pd), Work::kMemory);
    }
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, View(p.src, ctx, inputs[0])},
                                            {DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
                                            {DNNL_ARG_DIFF_SRC, CheckedView(p.src, ctx, grad_inputs[0])}};
    if (!p.workspace.empty()) args.emplace(DNNL_ARG_WORKSPACE, View(p.fwd_pd.workspace_desc(), ctx, p.workspace));
    Run(ctx, *p.bwd, std::move(args));
  }

 private:
  // Primitives for one input descriptor; backward made on first use. One
  // forward primitive (training) serves both modes, so the output format and
  // the workspace backward reads do not depend on the mode.
  struct Prims {
    memory::desc src;  // the key
    dnnl::lrn_forward::primitive_desc fwd_pd;
    Prim fwd;
    memory::desc dst;
    Tensor workspace;
    std::optional<Prim> bwd;
  };

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc src = DescOf(input);
    for (auto& p : cache_) {
      if (p->src == src) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->src = src;
    dnnl::lrn_forward::desc d(dnnl::prop_kind::forward_training, dnnl::algorithm::lrn_across_channels, src, setup_.size,
                              setup_.alpha, setup_.beta, setup_.k);
    p->fwd_pd = dnnl::lrn_forward::primitive_desc(d, ScratchpadAttr(), ctx.engine());
    p->fwd = MakePrim(p->fwd_pd, Work::kMemory);
    p->dst = p->fwd_pd.dst_desc();
    const memory::desc ws = p->fwd_pd.workspace_desc();
    if (ws.get_size() > 0) p->workspace = Tensor({static_cast<int64_t>((ws.get_size() + 3) / 4)});
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  const LayerSpec spec_;
  LrnSetup setup_;  // attributes and per-example shape
  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("lrn", DeviceKind::kCpu, Lrn, {.ints = {"size"}, .floats = {"alpha", "beta", "k"}});

}  // namespace
}  // namespace pstrain::cpu
