// add: y = x_0 + x_1 + ..., elementwise over inputs of one shape, on oneDNN
// sum. No attributes, no parameters. Every input's gradient is grad_output
// (converted to that input's layout).
//
// Fusion: with exactly two inputs, accepts a following relu (Layer::Fuse),
// computing relu(x_0 + x_1), as at the end of a residual block. Its backward
// then masks grad_output where the output is 0 (as relu's does, reading the
// output) and gives the masked gradient to both inputs, so it no longer
// passes its gradient through. On the CPU the relu runs in place on the sum
// (one buffer instead of two, the same passes): oneDNN 2.6's binary add with
// a relu post-op, the one-pass form, gave wrong sums and wrote past the
// output for 8-channel blocks (nChw8c) on AVX-512.
//
// Layouts: inputs in any formats; oneDNN chooses the output's (in practice
// the first input's).
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Add final : public Layer {
 public:
  explicit Add(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    num_inputs_ = input_shapes.size();
    return SetupAdd(input_shapes);
  }

  bool Fuse(const LayerSpec& next) override {
    if (next.type != "relu" || num_inputs_ != 2 || !cache_.empty()) return false;
    fuse_relu_ = true;
    return true;
  }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs).dst);
  }

  // Backward reads nothing; with a fused relu, the output (where it is 0).
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = fuse_relu_}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs);
    RunMultiSource(ctx, p.sum, p.srcs, inputs, p.dst, output);
    if (fuse_relu_) {
      const dnnl::memory y = CheckedView(p.dst, ctx, output);
      Run(ctx, p.relu->forward, {{DNNL_ARG_SRC, y}, {DNNL_ARG_DST, y}});
    }
  }

  bool PassesGradientThrough() const override { return !fuse_relu_; }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (!fuse_relu_) {
      for (Tensor& g : grad_inputs) {
        if (!g.empty()) dctx.Convert(grad_output, g);  // a parallel copy when the layouts agree
      }
      return;
    }
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs);
    const Tensor* masked = MaskedGradientTarget(p, output, grad_inputs);
    if (masked == nullptr) return;  // no gradient wanted
    Run(ctx, p.relu->backward,
        {{DNNL_ARG_DST, CheckedView(p.dst, ctx, output)},
         {DNNL_ARG_DIFF_DST, CheckedView(p.dst, ctx, grad_output)},
         {DNNL_ARG_DIFF_SRC, CheckedView(p.dst, ctx, *masked)}});
    for (Tensor& g : grad_inputs) {
      if (!g.empty() && &g != masked) ctx.Convert(*masked, g);
    }
  }

 private:
  // A fused relu on the sum's output, in place, and its backward.
  struct Relu {
    Prim forward, backward;
  };

  struct Prims {
    std::vector<memory::desc> srcs;  // the key
    memory::desc dst;
    Prim sum;
    std::optional<Relu> relu;  // when fused
    Tensor masked;             // the fused relu's gradient when no input's is laid out as the output
  };

  // Where the fused relu's backward writes: the first wanted input gradient
  // laid out as the output, else the scratch tensor; null when none is wanted.
  const Tensor* MaskedGradientTarget(Prims& p, const Tensor& output, absl::Span<Tensor> grad_inputs) {
    bool wanted = false;
    for (const Tensor& g : grad_inputs) {
      if (g.empty()) continue;
      wanted = true;
      if (DescOf(g) == p.dst) return &g;
    }
    if (!wanted) return nullptr;
    if (p.masked.empty()) p.masked = Tensor(output.shape(), output.layout());
    return &p.masked;
  }

  static Relu MakeRelu(CpuContext& ctx, const memory::desc& data) {
    const auto alg = dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
    dnnl::eltwise_forward::primitive_desc forward(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, data, 0.f), ScratchpadAttr(), ctx.engine());
    dnnl::eltwise_backward::primitive_desc backward(dnnl::eltwise_backward::desc(alg, data, data, 0.f),
                                                    ScratchpadAttr(), ctx.engine(), forward);
    return {MakePrim(forward, Work::kMemory), MakePrim(backward, Work::kMemory)};
  }

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
    if (fuse_relu_) p->relu = MakeRelu(ctx, p->dst);
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  size_t num_inputs_ = 0;
  bool fuse_relu_ = false;
  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("add", DeviceKind::kCpu, Add, {});

}  // namespace
}  // namespace pstrain::cpu
