#include "models/layers/cpu/pooling.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain::cpu {

using dnnl::memory;

Pooling::Pooling(std::string type, dnnl::algorithm algorithm, const LayerSpec& spec, bool global)
    : type_(std::move(type)), algorithm_(algorithm), spec_(spec), global_(global) {}

absl::StatusOr<Shape> Pooling::Setup(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(type_, " takes 1 input, got ", input_shapes.size()));
  }
  const Shape& in = input_shapes[0];
  if (global_) {
    if (in.size() != 3 || NumElements(in) <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(type_, " input must be [channels, height, width], got ", ShapeToString(in)));
    }
    window_ = Window2d{in[1], in[2], 1, 1, 0, 0};
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(window_, ReadWindow(spec_, type_, {}));
    if (window_.ph >= window_.kh || window_.pw >= window_.kw) {
      return absl::InvalidArgumentError(
          absl::StrCat(type_, " padding must be smaller than the kernel, got ", window_.ToString()));
    }
  }
  PSTRAIN_RETURN_IF_ERROR(CheckWindowFits(type_, window_, in));
  out_shape_ = {in[0], window_.OutH(in[1]), window_.OutW(in[2])};
  return out_shape_;
}

Pooling::Prims& Pooling::PrimsFor(CpuContext& ctx, const Tensor& input) {
  const memory::desc src = DescOf(input);
  for (auto& p : cache_) {
    if (p->src == src) return *p;
  }
  auto p = std::make_unique<Prims>();
  p->src = src;
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_training, algorithm_, src,
                                AnyDesc({input.dim(0), out_shape_[0], out_shape_[1], out_shape_[2]}),
                                {window_.sh, window_.sw}, {window_.kh, window_.kw}, {window_.ph, window_.pw},
                                {window_.ph, window_.pw});
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
    dnnl::pooling_backward::desc d(algorithm_, p.src, p.dst, {window_.sh, window_.sw}, {window_.kh, window_.kw},
                                   {window_.ph, window_.pw}, {window_.ph, window_.pw});
    p.bwd =
        MakePrim(dnnl::pooling_backward::primitive_desc(d, ScratchpadAttr(), ctx.engine(), p.fwd_pd), Work::kMemory);
  }
  std::unordered_map<int, memory> args = {{DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
                                          {DNNL_ARG_DIFF_SRC, CheckedView(p.src, ctx, grad_inputs[0])}};
  if (!p.workspace.empty()) args.emplace(DNNL_ARG_WORKSPACE, View(p.fwd_pd.workspace_desc(), ctx, p.workspace));
  Run(ctx, *p.bwd, std::move(args));
}

}  // namespace pstrain::cpu
