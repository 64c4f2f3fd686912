// dense: y = x W + b on oneDNN inner product.
//
// Attributes: "units" (required, > 0). Input [N, ...] is read as [N, K] with
// K the product of the per-example dims; output [N, units].
// Parameters: "weights" stored row-major as [K, units] (so y = x W, as in
// TensorFlow), which oneDNN sees as its [OC, IC] weights in the `io` layout;
// "bias" [units].
// Layouts: output plain. A blocked input (e.g. [N, C, 1, 1] after a global
// pool) is reordered to plain row-major first, and its gradient back.
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
        {{DNNL_ARG_SRC, AsMatrix(ctx, p.src, p.to_plain.Get(ctx, inputs[0]))},
         {DNNL_ARG_WEIGHTS, View(p.weights, ctx, parameters_[0].value)},
         {DNNL_ARG_BIAS, View(p.bias, ctx, parameters_[1].value)},
         {DNNL_ARG_DST, CheckedView(p.dst, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.bwd_weights) CreateBackward(ctx, p);
    if (!grad_inputs[0].empty()) {
      Run(ctx, *p.bwd_data,
          {{DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
           {DNNL_ARG_WEIGHTS, View(p.weights, ctx, parameters_[0].value)},
           {DNNL_ARG_DIFF_SRC, AsMatrix(ctx, p.src, p.from_plain.Target(ctx, grad_inputs[0]))}});
      p.from_plain.Commit(ctx, grad_inputs[0]);
    }
    Run(ctx, *p.bwd_weights,
        {{DNNL_ARG_SRC, AsMatrix(ctx, p.src, p.to_plain.Last(ctx, inputs[0]))},
         {DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
         {DNNL_ARG_DIFF_WEIGHTS, View(p.weights, ctx, parameters_[0].grad)},
         {DNNL_ARG_DIFF_BIAS, View(p.bias, ctx, parameters_[1].grad)}});
  }

 private:
  // Primitives for one input descriptor; the backward ones are made on first use.
  struct Prims {
    memory::desc in;  // the key
    memory::desc src, weights, bias, dst;
    Conversion to_plain;         // input format -> plain (with the input's dims)
    Conversion from_plain;       // plain -> input format, for the input's gradient
    Work work = Work::kCompute;  // tiny products run on one thread
    dnnl::inner_product_forward::primitive_desc fwd_pd;
    Prim fwd;
    std::optional<Prim> bwd_data, bwd_weights;
  };

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
    p.to_plain = Conversion(ctx, in, PlainDesc(input.shape()));
    p.from_plain = Conversion(ctx, PlainDesc(input.shape()), in);
    p.src = memory::desc({batch, setup_.in_features}, memory::data_type::f32, tag::nc);
    p.weights = memory::desc({setup_.units, setup_.in_features}, memory::data_type::f32, tag::io);
    p.bias = memory::desc({setup_.units}, memory::data_type::f32, tag::x);
    p.dst = memory::desc({batch, setup_.units}, memory::data_type::f32, tag::nc);
    dnnl::inner_product_forward::desc fwd(dnnl::prop_kind::forward_training, p.src, p.weights, p.bias, p.dst);
    p.fwd_pd = dnnl::inner_product_forward::primitive_desc(fwd, ScratchpadAttr(), ctx.engine());
    if (batch * setup_.ForwardFlopsPerExample() < kSmallFlops) p.work = Work::kOneThread;
    p.fwd = MakePrim(p.fwd_pd, p.work);
    cache_.push_back(std::make_unique<Prims>(std::move(p)));
    return *cache_.back();
  }

  void CreateBackward(CpuContext& ctx, Prims& p) {
    dnnl::inner_product_backward_data::desc data(p.src, p.weights, p.dst);
    p.bwd_data = MakePrim(
        dnnl::inner_product_backward_data::primitive_desc(data, ScratchpadAttr(), ctx.engine(), p.fwd_pd), p.work);
    dnnl::inner_product_backward_weights::desc weights(p.src, p.weights, p.bias, p.dst);
    p.bwd_weights = MakePrim(
        dnnl::inner_product_backward_weights::primitive_desc(weights, ScratchpadAttr(), ctx.engine(), p.fwd_pd),
        p.work);
  }

  const LayerSpec spec_;
  DenseSetup setup_;                           // in_features (K) and units
  std::vector<std::unique_ptr<Prims>> cache_;  // few entries: a linear scan
};

PSTRAIN_REGISTER_LAYER("dense", DeviceKind::kCpu, Dense);

}  // namespace
}  // namespace pstrain::cpu
