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
// nChw8c and blocked weights with AVX2). An input in another format is
// reordered into a layer-owned buffer; the plain weights are reordered into a
// blocked copy once per Forward() and the weight gradient back to plain once
// per Backward(). The output keeps oneDNN's format.
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/layers/cpu/dnnl_util.h"
#include "models/layers/window.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Conv2d final : public Layer {
 public:
  explicit Conv2d(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("conv2d takes 1 input, got ", input_shapes.size()));
    }
    const Shape& in = input_shapes[0];
    filters_ = spec_.GetInt("filters", -1);
    groups_ = spec_.GetInt("groups", 1);
    const int64_t bias = spec_.GetInt("bias", 1);
    if (filters_ <= 0) return absl::InvalidArgumentError("conv2d needs a positive \"filters\" attribute");
    if (bias != 0 && bias != 1)
      return absl::InvalidArgumentError(absl::StrCat("conv2d \"bias\" must be 0 or 1, got ", bias));
    has_bias_ = bias == 1;
    PSTRAIN_ASSIGN_OR_RETURN(window_, ReadWindow(spec_, "conv2d", {1, 1}));
    PSTRAIN_RETURN_IF_ERROR(CheckWindowFits("conv2d", window_, in));
    if (groups_ <= 0 || in[0] % groups_ != 0 || filters_ % groups_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat("conv2d groups ", groups_,
                                                     " must divide both the input channels (", ShapeToString(in),
                                                     ") and filters ", filters_));
    }
    in_shape_ = in;
    out_shape_ = {filters_, window_.OutH(in[1]), window_.OutW(in[2])};
    const int64_t per_group_in = in[0] / groups_;
    const int64_t fan_in = per_group_in * window_.kh * window_.kw;
    const int64_t fan_out = filters_ / groups_ * window_.kh * window_.kw;
    Shape w_shape = {filters_, per_group_in, window_.kh, window_.kw};
    parameters_.push_back({"weights", Tensor(w_shape), Tensor(w_shape), Initializer::kHeNormal, fan_in, fan_out});
    if (has_bias_) {
      parameters_.push_back({"bias", Tensor({filters_}), Tensor({filters_}), Initializer::kZeros, fan_in, fan_out});
    }
    return out_shape_;
  }

  int64_t ForwardFlopsPerExample() const override {
    return 2 * NumElements(out_shape_) * (in_shape_[0] / groups_) * window_.kh * window_.kw;
  }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs[0]).dst);
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    std::unordered_map<int, memory> args = {{DNNL_ARG_SRC, p.src.Get(ctx, inputs[0])},
                                            {DNNL_ARG_WEIGHTS, p.weights.Get(ctx, AsWeights(parameters_[0].value))},
                                            {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}};
    if (has_bias_) args.emplace(DNNL_ARG_BIAS, View(ctx, parameters_[1].value));
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
    // The (possibly reordered) src from Forward() when the formats agree.
    memory src = b.weights_src ? b.weights_src->Get(ctx, inputs[0]) : p.src.Last(ctx, inputs[0]);
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, src},
        {DNNL_ARG_DIFF_DST, b.weights_diff_dst.Get(ctx, grad_output)},
        {DNNL_ARG_DIFF_WEIGHTS, b.diff_weights.Target(ctx, AsWeights(parameters_[0].grad))}};
    if (has_bias_) args.emplace(DNNL_ARG_DIFF_BIAS, View(ctx, parameters_[1].grad));
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
    const int64_t per_group_in = in_shape_[0] / groups_;
    if (groups_ == 1) return {filters_, per_group_in, window_.kh, window_.kw};
    return {groups_, filters_ / groups_, per_group_in, window_.kh, window_.kw};
  }
  // A weights parameter viewed with oneDNN's dims (5-D goihw when grouped).
  Tensor AsWeights(const Tensor& t) const {
    const memory::dims d = WeightDims();
    return t.Reshaped(Shape(d.begin(), d.end()));
  }
  memory::dims Strides() const { return {window_.sh, window_.sw}; }
  memory::dims Padding() const { return {window_.ph, window_.pw}; }

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc in = DescOf(input);
    for (auto& p : cache_) {
      if (p->in == in) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->in = in;
    const int64_t n = input.dim(0);
    Shape src_shape = {n, in_shape_[0], in_shape_[1], in_shape_[2]};
    Shape dst_shape = {n, out_shape_[0], out_shape_[1], out_shape_[2]};
    const memory::dims w_dims = WeightDims();
    memory::desc w_any = AnyDesc(Shape(w_dims.begin(), w_dims.end()));
    memory::desc bias = PlainDesc({filters_});
    auto desc = has_bias_ ? dnnl::convolution_forward::desc(
                                dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                AnyDesc(src_shape), w_any, bias, AnyDesc(dst_shape), Strides(), Padding(), Padding())
                          : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                            dnnl::algorithm::convolution_direct, AnyDesc(src_shape),
                                                            w_any, AnyDesc(dst_shape), Strides(), Padding(), Padding());
    p->fwd_pd = dnnl::convolution_forward::primitive_desc(desc, ScratchpadAttr(), ctx.engine());
    p->fwd = MakePrim(p->fwd_pd, Work::kCompute);
    p->src = Conversion(ctx, in, p->fwd_pd.src_desc());
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
    const memory::desc src_any = AnyDesc(DimsOf(p.fwd_pd.src_desc()));
    const memory::desc dst_any = AnyDesc(DimsOf(p.dst));
    const memory::desc w_any = AnyDesc(DimsOf(p.fwd_pd.weights_desc()));
    dnnl::convolution_backward_data::desc data(dnnl::algorithm::convolution_direct, src_any, w_any, dst_any, Strides(),
                                               Padding(), Padding());
    dnnl::convolution_backward_data::primitive_desc data_pd(data, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    b.data = MakePrim(data_pd, Work::kCompute);
    if (data_pd.weights_desc() != p.fwd_pd.weights_desc()) {
      b.data_weights.emplace(ctx, PlainWeights(), data_pd.weights_desc());
    }
    b.data_diff_dst = Conversion(ctx, p.dst, data_pd.diff_dst_desc());
    b.diff_src = Conversion(ctx, data_pd.diff_src_desc(), p.in);

    auto wdesc = has_bias_ ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                                                      w_any, PlainDesc({filters_}), dst_any, Strides(),
                                                                      Padding(), Padding())
                           : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any,
                                                                      w_any, dst_any, Strides(), Padding(), Padding());
    dnnl::convolution_backward_weights::primitive_desc weights_pd(wdesc, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    b.weights = MakePrim(weights_pd, Work::kCompute);
    if (weights_pd.src_desc() != p.fwd_pd.src_desc()) b.weights_src.emplace(ctx, p.in, weights_pd.src_desc());
    b.weights_diff_dst = Conversion(ctx, p.dst, weights_pd.diff_dst_desc());
    b.diff_weights = Conversion(ctx, weights_pd.diff_weights_desc(), PlainWeights());
    p.bwd = std::move(b);
  }

  const LayerSpec spec_;
  int64_t filters_ = 0, groups_ = 1;
  bool has_bias_ = true;
  Window2d window_;
  Shape in_shape_, out_shape_;
  std::vector<std::unique_ptr<Prims>> cache_;  // few entries (train and eval batch sizes): a linear scan
};

PSTRAIN_REGISTER_LAYER("conv2d", DeviceKind::kCpu, Conv2d);

}  // namespace
}  // namespace pstrain::cpu
