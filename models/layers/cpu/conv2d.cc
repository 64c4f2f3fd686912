// conv2d: 2-D convolution (cross-correlation, as every framework computes it)
// on oneDNN, forward and both backward passes.
//
// Attributes: "filters" (required, > 0), "kernel" [kh, kw] (required),
// "stride" [sh, sw] (default [1, 1]), "padding" [ph, pw] symmetric (default
// [0, 0]), "groups" (default 1; divides both channel counts), "bias" 1/0
// (default 1). Input [C, H, W] -> output [filters, OH, OW], OH =
// (H + 2ph - kh) / sh + 1 (floor).
// Parameters: "weights" [filters, C/groups, kh, kw] (HeNormal, fan_in =
// C/groups*kh*kw), "bias" [filters] (zeros) when bias=1.
//
// Layouts: oneDNN chooses the src, weights and dst formats (format_tag::any;
// nChw8c and blocked weights with AVX2, nChw16c with AVX-512).
// Precision bf16 (ComputeType): src, weights and diff_dst are reordered to
// bf16 for the products; dst, diff_src and the weight gradient are f32.
// Staging: the blocked weights are the layer's own (forward and backward
// read them); every other conversion goes through the context's shared
// staging slots, so a converted input is converted again in backward
// rather than kept for the whole step. The plain weights are reordered into
// the blocked copy once per Forward() and the weight gradient back to plain
// once per Backward(). The output keeps oneDNN's format.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupConv2d(spec_, input_shapes, &parameters_));
    return setup_.output;
  }

  int64_t ForwardFlopsPerExample() const override { return setup_.ForwardFlopsPerExample(); }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs[0]).dst);
  }

  // Backward reads the input (weight gradients).
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, p.src.Get(ctx, inputs[0])},
                                            {DNNL_ARG_WEIGHTS, p.weights.Get(ctx, AsWeights(parameters_[0].value))},
                                            {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}};
    if (setup_.has_bias) args.emplace(DNNL_ARG_BIAS, View(ctx, parameters_[1].value));
    Run(ctx, p.fwd, std::move(args));
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.bwd) CreateBackward(ctx, p);
    Backwards& b = *p.bwd;
    const Tensor w = AsWeights(parameters_[0].value);
    if (!grad_inputs[0].empty()) {
      // The blocked weights from Forward() when the formats agree.
      memory weights = b.data_weights ? b.data_weights->Get(ctx, w) : p.weights.Last(ctx, w);
      Run(ctx, b.data,
          {{DNNL_ARG_DIFF_DST, b.data_diff_dst.Get(ctx, grad_output)},
           {DNNL_ARG_WEIGHTS, weights},
           {DNNL_ARG_DIFF_SRC, b.diff_src.Target(ctx, grad_inputs[0])}});
      b.diff_src.Commit(ctx, grad_inputs[0]);
    }
    // The input in backward-weights' format and type, converted again where
    // it needs converting (the forward's conversion lived in a shared slot).
    memory src = b.weights_src ? b.weights_src->Get(ctx, inputs[0]) : p.src.Get(ctx, inputs[0]);
    // The converted gradient from backward-data when both want one format.
    const bool reuse_diff_dst = !grad_inputs[0].empty() && b.weights_diff_dst.to() == b.data_diff_dst.to();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DIFF_DST,
         reuse_diff_dst ? b.data_diff_dst.Last(ctx, grad_output) : b.weights_diff_dst.Get(ctx, grad_output)},
        {DNNL_ARG_DIFF_WEIGHTS, b.diff_weights.Target(ctx, AsWeights(parameters_[0].grad))}};
    if (setup_.has_bias) args.emplace(DNNL_ARG_DIFF_BIAS, View(ctx, parameters_[1].grad));
    Run(ctx, b.weights, std::move(args));
    b.diff_weights.Commit(ctx, AsWeights(parameters_[0].grad));
  }

 private:
  struct Backwards {
    Prim data, weights;
    std::optional<Conversion> data_weights;  // plain -> bwd-data's format, when not the forward's
    Conversion data_diff_dst;                // output format -> bwd-data's diff_dst
    Conversion diff_src;                     // bwd-data's diff_src -> the input's format
    std::optional<Conversion> weights_src;   // input format -> bwd-weights' src, when not the forward's
    Conversion weights_diff_dst;             // output format -> bwd-weights' diff_dst
    Conversion diff_weights;                 // bwd-weights' diff_weights -> plain
  };
  // Primitives for one input descriptor; the backward ones made on first use.
  struct Prims {
    memory::desc in;  // the key
    dnnl::convolution_forward::primitive_desc fwd_pd;
    Prim fwd;
    Conversion src;      // input format -> fwd src
    Conversion weights;  // plain -> fwd weights (blocked copy lives here)
    memory::desc dst;
    std::optional<Backwards> bwd;
  };

  memory::dims WeightDims() const {
    const Conv2dSetup& s = setup_;
    if (s.groups == 1) return {s.filters, s.InputChannelsPerGroup(), s.window.kh, s.window.kw};
    return {s.groups, s.filters / s.groups, s.InputChannelsPerGroup(), s.window.kh, s.window.kw};
  }
  // A weights parameter viewed with oneDNN's dims (5-D goihw when grouped).
  Tensor AsWeights(const Tensor& t) const {
    const memory::dims d = WeightDims();
    return t.Reshaped(Shape(d.begin(), d.end()));
  }
  memory::dims Strides() const { return {setup_.window.sh, setup_.window.sw}; }
  memory::dims Padding() const { return {setup_.window.ph, setup_.window.pw}; }

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc in = DescOf(input);
    for (auto& p : cache_) {
      if (p->in == in) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->in = in;
    const int64_t n = input.dim(0);
    Shape src_shape = {n, setup_.input[0], setup_.input[1], setup_.input[2]};
    Shape dst_shape = {n, setup_.output[0], setup_.output[1], setup_.output[2]};
    const memory::dims w_dims = WeightDims();
    const memory::data_type ct = ComputeType(ctx);
    memory::desc w_any = AnyDesc(Shape(w_dims.begin(), w_dims.end()), ct);
    memory::desc src_any = AnyDesc(src_shape, ct);
    memory::desc bias = PlainDesc({setup_.filters});
    auto desc =
        setup_.has_bias
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              src_any, w_any, bias, AnyDesc(dst_shape), Strides(), Padding(), Padding())
            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              src_any, w_any, AnyDesc(dst_shape), Strides(), Padding(), Padding());
    p->fwd_pd = dnnl::convolution_forward::primitive_desc(desc, ScratchpadAttr(), ctx.engine());
    p->fwd = MakePrim(p->fwd_pd, Work::kCompute);
    p->src = Conversion(ctx, in, p->fwd_pd.src_desc(), Conversion::kSrcSlot);
    p->weights = Conversion(ctx, PlainWeights(), p->fwd_pd.weights_desc());
    p->dst = p->fwd_pd.dst_desc();
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  memory::desc PlainWeights() const {
    memory::dims d = WeightDims();
    return PlainDesc(Shape(d.begin(), d.end()));
  }

  void CreateBackward(CpuContext& ctx, Prims& p) {
    Backwards b;
    // Products in the compute type, results in f32 (the same under fp32).
    const memory::data_type ct = ComputeType(ctx);
    const memory::desc src_any = AnyDesc(DimsOf(p.fwd_pd.src_desc()), ct);
    const memory::desc diff_src_any = AnyDesc(DimsOf(p.fwd_pd.src_desc()));
    const memory::desc diff_dst_any = AnyDesc(DimsOf(p.dst), ct);
    const memory::desc w_any = AnyDesc(DimsOf(p.fwd_pd.weights_desc()), ct);
    const memory::desc diff_w_any = AnyDesc(DimsOf(p.fwd_pd.weights_desc()));
    dnnl::convolution_backward_data::desc data(dnnl::algorithm::convolution_direct, diff_src_any, w_any, diff_dst_any,
                                               Strides(), Padding(), Padding());
    dnnl::convolution_backward_data::primitive_desc data_pd(data, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    b.data = MakePrim(data_pd, Work::kCompute);
    if (data_pd.weights_desc() != p.fwd_pd.weights_desc()) {
      b.data_weights.emplace(ctx, PlainWeights(), data_pd.weights_desc());
    }
    b.data_diff_dst = Conversion(ctx, p.dst, data_pd.diff_dst_desc(), Conversion::kDiffDstSlot);
    b.diff_src = Conversion(ctx, data_pd.diff_src_desc(), p.in, Conversion::kDiffSrcSlot);

    auto wdesc = setup_.has_bias ? dnnl::convolution_backward_weights::desc(
                                       dnnl::algorithm::convolution_direct, src_any, diff_w_any,
                                       PlainDesc({setup_.filters}), diff_dst_any, Strides(), Padding(), Padding())
                                 : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct,
                                                                            src_any, diff_w_any, diff_dst_any,
                                                                            Strides(), Padding(), Padding());
    dnnl::convolution_backward_weights::primitive_desc weights_pd(wdesc, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    b.weights = MakePrim(weights_pd, Work::kCompute);
    if (weights_pd.src_desc() != p.fwd_pd.src_desc()) {
      b.weights_src.emplace(ctx, p.in, weights_pd.src_desc(), Conversion::kSrcSlot);
    }
    b.weights_diff_dst = Conversion(ctx, p.dst, weights_pd.diff_dst_desc(), Conversion::kWeightsDiffDstSlot);
    b.diff_weights = Conversion(ctx, weights_pd.diff_weights_desc(), PlainWeights(), Conversion::kDiffWeightsSlot);
    p.bwd = std::move(b);
  }

  const LayerSpec spec_;
  Conv2dSetup setup_;                          // attributes and per-example shapes
  std::vector<std::unique_ptr<Prims>> cache_;  // few entries (train and eval batch sizes): a linear scan
};

PSTRAIN_REGISTER_LAYER("conv2d", DeviceKind::kCpu, Conv2d,
                       {.ints = {"filters", "kernel", "stride", "padding", "groups", "bias"}});

}  // namespace
}  // namespace pstrain::cpu
