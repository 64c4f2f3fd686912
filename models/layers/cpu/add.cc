// add: y = x_0 + x_1 + ..., elementwise over inputs of one shape, on oneDNN
// sum. No attributes, no parameters. Every input's gradient is grad_output
// (converted to that input's layout).
// Layouts: inputs in any formats; oneDNN chooses the output's (in practice
// the first input's).
#include <memory>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Add final : public Layer {
 public:
  explicit Add(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupAdd(input_shapes); }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs).dst);
  }

  // Backward reads nothing.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs);
    RunMultiSource(ctx, p.sum, p.srcs, inputs, p.dst, output);
  }

  bool PassesGradientThrough() const override { return true; }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    for (Tensor& g : grad_inputs) {
      if (!g.empty()) ctx.Convert(grad_output, g);  // a parallel copy when the layouts agree
    }
  }

 private:
  struct Prims {
    std::vector<memory::desc> srcs;  // the key
    memory::desc dst;
    Prim sum;
  };

  Prims& PrimsFor(CpuContext& ctx, absl::Span<const Tensor> inputs) {
    const std::vector<memory::desc> srcs = DescsOf(inputs);
    for (auto& p : cache_) {
      if (p->srcs == srcs) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->srcs = srcs;
    dnnl::sum::primitive_desc pd(std::vector<float>(srcs.size(), 1.0f), srcs, ctx.engine(), ScratchpadAttr());
    p->dst = pd.dst_desc();
    p->sum = MakePrim(pd, Work::kMemory);
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCpu, Add, {});

}  // namespace
}  // namespace pstrain::cpu
