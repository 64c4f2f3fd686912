// dense: y = x W + b on oneDNN inner product.
//
// Attributes: "units" (required, > 0). Input [N, ...] is read as [N, K] with
// K the product of the per-example dims; output [N, units].
// Parameters: "weights" stored row-major as [K, units] (so y = x W, as in
// TensorFlow), which oneDNN sees as its [OC, IC] weights in the `io` layout;
// "bias" [units].
// Layouts: output plain. A blocked input (e.g. [N, C, 1, 1] after a global
// pool) is reordered to plain row-major first, and its gradient back.
// Precision bf16 (ComputeType): the input, the weights and the output's
// gradient are reordered to bf16 for the products; the output and both
// gradients are f32.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Below this many FLOPs a product runs on one thread (see Work in dnnl_util.h).
constexpr int64_t kSmallFlops = int64_t{1} << 24;

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
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    Run(ctx, p.fwd,
        {{DNNL_ARG_SRC, AsMatrix(ctx, p.src, p.to_src.Get(ctx, inputs[0]))},
         {DNNL_ARG_WEIGHTS, p.fwd_weights.Get(ctx, AsOcIc(p, parameters_[0].value))},
         {DNNL_ARG_BIAS, View(p.bias, ctx, parameters_[1].value)},
         {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.bwd_weights) CreateBackward(ctx, p);
    const memory diff_dst = p.to_diff_dst.Get(ctx, grad_output);
    if (!grad_inputs[0].empty()) {
      // The forward's weights when backward-data wants the same format.
      const memory weights = p.bwd_data_weights ? p.bwd_data_weights->Get(ctx, AsOcIc(p, parameters_[0].value))
                                                : p.fwd_weights.Last(ctx, AsOcIc(p, parameters_[0].value));
      Run(ctx, *p.bwd_data,
          {{DNNL_ARG_DIFF_DST, diff_dst},
           {DNNL_ARG_WEIGHTS, weights},
           {DNNL_ARG_DIFF_SRC, AsMatrix(ctx, p.diff_src, p.from_plain.Target(ctx, grad_inputs[0]))}});
      p.from_plain.Commit(ctx, grad_inputs[0]);
    }
    Run(ctx, *p.bwd_weights,
        {{DNNL_ARG_SRC, AsMatrix(ctx, p.src, p.to_src.Get(ctx, inputs[0]))},  // again: a shared slot
         {DNNL_ARG_DIFF_DST, diff_dst},
         {DNNL_ARG_DIFF_WEIGHTS, p.to_plain_diff_weights.Target(ctx, AsOcIc(p, parameters_[0].grad))},
         {DNNL_ARG_DIFF_BIAS, View(p.bias, ctx, parameters_[1].grad)}});
    p.to_plain_diff_weights.Commit(ctx, AsOcIc(p, parameters_[0].grad));
  }

 private:
  // Primitives for one input descriptor; the backward ones are made on first use.
  struct Prims {
    memory::desc in;                             // the key
    memory::desc src;                            // [N, K] in the compute type
    memory::desc diff_src;                       // [N, K] f32
    memory::desc weights;                        // the parameter: f32 [OC, IC] as io
    TensorLayoutPtr weights_layout;              // `weights` as a tensor layout (AsOcIc)
    memory::desc compute_weights;                // what the products take: `weights` (fp32), or any bf16
    memory::desc diff_weights;                   // what backward-weights writes: `weights` (fp32), or any f32
    memory::desc bias, dst;                      // f32
    Conversion to_src;                           // input format -> plain, in the compute type (with the input's dims)
    Conversion from_plain;                       // plain f32 -> input format, for the input's gradient
    Conversion fwd_weights;                      // the parameter -> the forward's weights
    Conversion to_diff_dst;                      // the output's gradient -> the compute type
    std::optional<Conversion> bwd_data_weights;  // the parameter -> backward-data's, when not the forward's
    Conversion to_plain_diff_weights;            // backward-weights' diff_weights -> the parameter's gradient
    Work work = Work::kCompute;                  // tiny products run on one thread
    dnnl::inner_product_forward::primitive_desc fwd_pd;
    Prim fwd;
    std::optional<Prim> bwd_data, bwd_weights;
  };

  // A [K, units] parameter (value or gradient) seen as oneDNN's [OC, IC]
  // weights in the io format: the same bytes.
  Tensor AsOcIc(const Prims& p, const Tensor& t) const {
    return Tensor({setup_.units, setup_.in_features}, DType::kFloat32, t.buffer(), t.device(), p.weights_layout);
  }

  // `m` (plain, the input's dims) viewed as the [N, K] matrix `src`.
  static memory AsMatrix(const CpuContext& ctx, const memory::desc& src, const memory& m) {
    return memory(src, ctx.engine(), m.get_data_handle());
  }

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc in = DescOf(input);
    for (auto& p : cache_) {
      if (p->in == in) return *p;
    }
    const int64_t batch = input.dim(0);
    Prims p;
    p.in = in;
    const memory::data_type ct = ComputeType(ctx);
    const bool fp32 = ct == memory::data_type::f32;
    p.to_src = Conversion(ctx, in, PlainDesc(input.shape(), ct), Conversion::kSrcSlot);
    p.from_plain = Conversion(ctx, PlainDesc(input.shape()), in, Conversion::kDiffSrcSlot);
    p.src = memory::desc({batch, setup_.in_features}, ct, tag::nc);
    p.diff_src = memory::desc({batch, setup_.in_features}, memory::data_type::f32, tag::nc);
    p.weights = memory::desc({setup_.units, setup_.in_features}, memory::data_type::f32, tag::io);
    p.weights_layout = std::make_shared<DnnlLayout>(p.weights);
    p.bias = memory::desc({setup_.units}, memory::data_type::f32, tag::x);
    p.dst = memory::desc({batch, setup_.units}, memory::data_type::f32, tag::nc);
    p.to_diff_dst = Conversion(ctx, p.dst, memory::desc({batch, setup_.units}, ct, tag::nc), Conversion::kDiffDstSlot);
    // fp32 reads and writes the parameter as it is; bf16 lets the primitives choose.
    p.compute_weights = fp32 ? p.weights : AnyDesc({setup_.units, setup_.in_features}, ct);
    p.diff_weights = fp32 ? p.weights : AnyDesc({setup_.units, setup_.in_features});
    dnnl::inner_product_forward::desc fwd(dnnl::prop_kind::forward_training, p.src, p.compute_weights, p.bias, p.dst);
    p.fwd_pd = dnnl::inner_product_forward::primitive_desc(fwd, ScratchpadAttr(), ctx.engine());
    p.fwd_weights = Conversion(ctx, p.weights, p.fwd_pd.weights_desc());
    if (batch * setup_.ForwardFlopsPerExample() < kSmallFlops) p.work = Work::kOneThread;
    p.fwd = MakePrim(p.fwd_pd, p.work);
    cache_.push_back(std::make_unique<Prims>(std::move(p)));
    return *cache_.back();
  }

  void CreateBackward(CpuContext& ctx, Prims& p) {
    const memory::desc diff_dst = p.to_diff_dst.to();
    dnnl::inner_product_backward_data::desc data(p.diff_src, p.compute_weights, diff_dst);
    dnnl::inner_product_backward_data::primitive_desc data_pd(data, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    p.bwd_data = MakePrim(data_pd, p.work);
    if (data_pd.weights_desc() != p.fwd_pd.weights_desc()) {
      p.bwd_data_weights.emplace(ctx, p.weights, data_pd.weights_desc());
    }
    dnnl::inner_product_backward_weights::desc wdesc(p.src, p.diff_weights, p.bias, diff_dst);
    dnnl::inner_product_backward_weights::primitive_desc weights_pd(wdesc, ScratchpadAttr(), ctx.engine(), p.fwd_pd);
    p.bwd_weights = MakePrim(weights_pd, p.work);
    p.to_plain_diff_weights = Conversion(ctx, weights_pd.diff_weights_desc(), p.weights, Conversion::kDiffWeightsSlot);
  }

  const LayerSpec spec_;
  DenseSetup setup_;                           // in_features (K) and units
  std::vector<std::unique_ptr<Prims>> cache_;  // few entries: a linear scan
};

PSTRAIN_REGISTER_LAYER("dense", DeviceKind::kCpu, Dense, {.ints = {"units"}});

}  // namespace
}  // namespace pstrain::cpu
