// relu: y = max(x, 0), elementwise, any shape, on oneDNN eltwise.
// No attributes, no parameters. The gradient at x == 0 is 0.
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "models/layers/cpu/dnnl_util.h"

namespace pstrain::cpu {
namespace {

class Relu final : public Layer {
 public:
  explicit Relu(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    if (input_shapes.size() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("relu takes 1 input, got ", input_shapes.size()));
    }
    return input_shapes[0];
  }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0].num_elements());
    ExecuteAndWait(ctx, p.fwd,
                   {{DNNL_ARG_SRC, View(p.data, ctx, inputs[0])}, {DNNL_ARG_DST, View(p.data, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0].num_elements());
    if (!p.bwd) {
      dnnl::eltwise_backward::desc bwd(dnnl::algorithm::eltwise_relu, p.data, p.data, 0.f);
      p.bwd.emplace(dnnl::eltwise_backward::primitive_desc(bwd, ctx.engine(), p.fwd_pd));
    }
    ExecuteAndWait(ctx, *p.bwd,
                   {{DNNL_ARG_SRC, View(p.data, ctx, inputs[0])},
                    {DNNL_ARG_DIFF_DST, View(p.data, ctx, grad_output)},
                    {DNNL_ARG_DIFF_SRC, View(p.data, ctx, grad_inputs[0])}});
  }

 private:
  // Elementwise, so tensors are viewed as 1-D and primitives keyed by size.
  struct Prims {
    dnnl::memory::desc data;
    dnnl::eltwise_forward::primitive_desc fwd_pd;
    dnnl::eltwise_forward fwd;
    std::optional<dnnl::eltwise_backward> bwd;
  };

  Prims& PrimsFor(CpuContext& ctx, int64_t elements) {
    auto it = cache_.find(elements);
    if (it != cache_.end()) return it->second;
    Prims p;
    p.data = PlainDesc({elements});
    dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu, p.data, 0.f);
    p.fwd_pd = dnnl::eltwise_forward::primitive_desc(fwd, ctx.engine());
    p.fwd = dnnl::eltwise_forward(p.fwd_pd);
    return cache_.emplace(elements, std::move(p)).first->second;
  }

  std::map<int64_t, Prims> cache_;  // by element count
};

PSTRAIN_REGISTER_LAYER("relu", DeviceKind::kCpu, Relu);

}  // namespace
}  // namespace pstrain::cpu
