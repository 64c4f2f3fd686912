// relu: y = max(x, 0), elementwise, any shape, on oneDNN eltwise.
// No attributes, no parameters. The gradient at x == 0 is 0.
// Backward reads the output (y > 0 where x > 0), not the input: after an add
// the input is then dead once forward has read it.
// Layouts: works in the input's format; output likewise.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

class Relu final : public Layer {
 public:
  explicit Relu(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupRelu(input_shapes); }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return inputs[0].layout();
  }

  // Backward reads the output (relu_use_dst_for_bwd).
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = true}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    Run(ctx, p.fwd, {{DNNL_ARG_SRC, View(p.data, ctx, inputs[0])}, {DNNL_ARG_DST, CheckedView(p.data, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    if (!p.bwd) {
      dnnl::eltwise_backward::desc bwd(dnnl::algorithm::eltwise_relu_use_dst_for_bwd, p.data, p.data, 0.f);
      p.bwd = MakePrim(dnnl::eltwise_backward::primitive_desc(bwd, ScratchpadAttr(), ctx.engine(), p.fwd_pd),
                       Work::kMemory);
    }
    Run(ctx, *p.bwd,
        {{DNNL_ARG_DST, View(p.data, ctx, output)},
         {DNNL_ARG_DIFF_DST, CheckedView(p.data, ctx, grad_output)},
         {DNNL_ARG_DIFF_SRC, CheckedView(p.data, ctx, grad_inputs[0])}});
  }

 private:
  // Primitives for one input descriptor (input, output and gradients share it).
  struct Prims {
    dnnl::memory::desc data;  // the key
    dnnl::eltwise_forward::primitive_desc fwd_pd;
    Prim fwd;
    std::optional<Prim> bwd;
  };

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const dnnl::memory::desc data = DescOf(input);
    for (auto& p : cache_) {
      if (p->data == data) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->data = data;
    dnnl::eltwise_forward::desc fwd(dnnl::prop_kind::forward_training, dnnl::algorithm::eltwise_relu_use_dst_for_bwd,
                                    data, 0.f);
    p->fwd_pd = dnnl::eltwise_forward::primitive_desc(fwd, ScratchpadAttr(), ctx.engine());
    p->fwd = MakePrim(p->fwd_pd, Work::kMemory);
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("relu", DeviceKind::kCpu, Relu, {});

}  // namespace
}  // namespace pstrain::cpu
