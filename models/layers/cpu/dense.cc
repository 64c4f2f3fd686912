// dense: y = x W + b on oneDNN inner product.
//
// Attributes: "units" (required, > 0). Input [N, ...] is read as [N, K] with
// K the product of the per-example dims; output [N, units].
// Parameters: "weights" stored row-major as [K, units] (so y = x W, as in
// TensorFlow), which oneDNN sees as its [OC, IC] weights in the `io` layout;
// "bias" [units].
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "models/layers/cpu/dnnl_util.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

class Dense final : public Layer {
 public:
  explicit Dense(const LayerSpec& spec) : units_(spec.GetInt("units", -1)) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("dense takes 1 input, got ", input_shapes.size()));
    }
    if (units_ <= 0) return absl::InvalidArgumentError("dense needs a positive \"units\" attribute");
    in_features_ = NumElements(input_shapes[0]);
    if (input_shapes[0].empty() || in_features_ <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense input must be non-empty, got ", ShapeToString(input_shapes[0])));
    }
    Shape w_shape = {in_features_, units_};
    parameters_.push_back(
        {"weights", Tensor(w_shape), Tensor(w_shape), Initializer::kGlorotUniform, in_features_, units_});
    parameters_.push_back({"bias", Tensor({units_}), Tensor({units_}), Initializer::kZeros, in_features_, units_});
    return Shape{units_};
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0].dim(0));
    ExecuteAndWait(ctx, p.fwd,
                   {{DNNL_ARG_SRC, View(p.src, ctx, inputs[0])},
                    {DNNL_ARG_WEIGHTS, View(p.weights, ctx, parameters_[0].value)},
                    {DNNL_ARG_BIAS, View(p.bias, ctx, parameters_[1].value)},
                    {DNNL_ARG_DST, View(p.dst, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0].dim(0));
    if (!p.bwd_weights) CreateBackward(ctx, p);
    if (!grad_inputs[0].empty()) {
      ExecuteAndWait(ctx, *p.bwd_data,
                     {{DNNL_ARG_DIFF_DST, View(p.dst, ctx, grad_output)},
                      {DNNL_ARG_WEIGHTS, View(p.weights, ctx, parameters_[0].value)},
                      {DNNL_ARG_DIFF_SRC, View(p.src, ctx, grad_inputs[0])}});
    }
    ExecuteAndWait(ctx, *p.bwd_weights,
                   {{DNNL_ARG_SRC, View(p.src, ctx, inputs[0])},
                    {DNNL_ARG_DIFF_DST, View(p.dst, ctx, grad_output)},
                    {DNNL_ARG_DIFF_WEIGHTS, View(p.weights, ctx, parameters_[0].grad)},
                    {DNNL_ARG_DIFF_BIAS, View(p.bias, ctx, parameters_[1].grad)}});
  }

 private:
  // Primitives for one batch size; the backward ones are made on first use.
  struct Prims {
    memory::desc src, weights, bias, dst;
    dnnl::inner_product_forward::primitive_desc fwd_pd;
    dnnl::inner_product_forward fwd;
    std::optional<dnnl::inner_product_backward_data> bwd_data;
    std::optional<dnnl::inner_product_backward_weights> bwd_weights;
  };

  Prims& PrimsFor(CpuContext& ctx, int64_t batch) {
    auto it = cache_.find(batch);
    if (it != cache_.end()) return it->second;
    Prims p;
    p.src = memory::desc({batch, in_features_}, memory::data_type::f32, tag::nc);
    p.weights = memory::desc({units_, in_features_}, memory::data_type::f32, tag::io);
    p.bias = memory::desc({units_}, memory::data_type::f32, tag::x);
    p.dst = memory::desc({batch, units_}, memory::data_type::f32, tag::nc);
    dnnl::inner_product_forward::desc fwd(dnnl::prop_kind::forward_training, p.src, p.weights, p.bias, p.dst);
    p.fwd_pd = dnnl::inner_product_forward::primitive_desc(fwd, ctx.engine());
    p.fwd = dnnl::inner_product_forward(p.fwd_pd);
    return cache_.emplace(batch, std::move(p)).first->second;
  }

  void CreateBackward(CpuContext& ctx, Prims& p) {
    dnnl::inner_product_backward_data::desc data(p.src, p.weights, p.dst);
    p.bwd_data.emplace(dnnl::inner_product_backward_data::primitive_desc(data, ctx.engine(), p.fwd_pd));
    dnnl::inner_product_backward_weights::desc weights(p.src, p.weights, p.bias, p.dst);
    p.bwd_weights.emplace(dnnl::inner_product_backward_weights::primitive_desc(weights, ctx.engine(), p.fwd_pd));
  }

  const int64_t units_;
  int64_t in_features_ = 0;
  std::map<int64_t, Prims> cache_;  // by batch size
};

PSTRAIN_REGISTER_LAYER("dense", DeviceKind::kCpu, Dense);

}  // namespace
}  // namespace pstrain::cpu
