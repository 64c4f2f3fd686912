#include "models/layers/cpu/pooling.h"

#include <utility>

namespace pstrain::cpu {

using dnnl::memory;

Pooling::Pooling(std::string type, dnnl::algorithm algorithm, const LayerSpec& spec, bool global)
    : type_(std::move(type)), algorithm_(algorithm), spec_(spec), global_(global) {}

absl::StatusOr<Shape> Pooling::Setup(const std::vector<Shape>& input_shapes) {
  PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupPooling(spec_, type_, input_shapes, global_));
  return setup_.output;
}

Pooling::Prims& Pooling::PrimsFor(CpuContext& ctx, const Tensor& input) {
  const memory::desc src = DescOf(input);
  for (auto& p : cache_) {
    if (p->src == src) return *p;
  }
  auto p = std::make_unique<Prims>();
  p->src = src;
  const Window2d& w = setup_.window;
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, algorithm_, src,
                                AnyDesc({input.dim(0), setup_.output[0], setup_.output[1], setup_.output[2]}),
                                {w.sh, w.sw}, {w.kh, w.kw}, {w.ph, w.pw}, {w.ph, w.pw});
  p->fwd_pd = dnnl::pooling_forward::primitive_desc(d, ScratchpadAttr(), ctx.engine());
  p->fwd = MakePrim(p->fwd_pd, Work::kMemory);
  p->dst = p->fwd_pd.dst_desc();
  const memory::desc ws = p->fwd_pd.workspace_desc();
  if (ws.get_size() > 0) p->workspace = Tensor({static_cast<int64_t>((ws.get_size() + 3) / 4)});
  cache_.push_back(std::move(p));
  return *cache_.back();
}

TensorLayoutPtr Pooling::OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) {
  return LayoutOf(PrimsFor(AsCpu(ctx), inputs[0]).dst);
}

// Inference runs the training primitive too (its only extra is max
// pooling's workspace), so both modes share one output format.
void Pooling::Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) {
  CpuContext& ctx = AsCpu(dctx);
  Prims& p = PrimsFor(ctx, inputs[0]);
  std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, View(p.src, ctx, inputs[0])},
                                          {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}};
  if (!p.workspace.empty()) args.emplace(DNNL_ARG_WORKSPACE, View(p.fwd_pd.workspace_desc(), ctx, p.workspace));
  Run(ctx, p.fwd, std::move(args));
}

void Pooling::Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output,
                       const Tensor& grad_output, absl::Span<Tensor> grad_inputs) {
  if (grad_inputs[0].empty()) return;
  CpuContext& ctx = AsCpu(dctx);
  Prims& p = PrimsFor(ctx, inputs[0]);
  if (!p.bwd) {
    const Window2d& w = setup_.window;
    dnnl::pooling_backward::desc d(algorithm_, p.src, p.dst, {w.sh, w.sw}, {w.kh, w.kw}, {w.ph, w.pw}, {w.ph, w.pw});
    p.bwd =
        MakePrim(dnnl::pooling_backward::primitive_desc(d, ScratchpadAttr(), ctx.engine(), p.fwd_pd), Work::kMemory);
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
                                          {DNNL_ARG_DIFF_SRC, CheckedView(p.src, ctx, grad_inputs[0])}};
  if (!p.workspace.empty()) args.emplace(DNNL_ARG_WORKSPACE, View(p.fwd_pd.workspace_desc(), ctx, p.workspace));
  Run(ctx, *p.bwd, std::move(args));
}

}  // namespace pstrain::cpu
