// concat: joins any number of inputs along the channel axis (axis 1 of the
// batched [N, C_i, ...]) on oneDNN. No attributes, no parameters. Inputs must
// agree in every dim but the channels; output [sum C_i, ...]. The gradient
// of input i is its channel slice of the output's gradient.
//
// Layouts: inputs in any formats; oneDNN chooses the output's (usually the
// inputs' blocked format). When an input's channel slice of that format is
// not addressable (channel offsets off the block size) the output is plain
// row-major instead.
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

class Concat final : public Layer {
 public:
  explicit Concat(const LayerSpec&) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override { return SetupConcat(input_shapes); }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return LayoutOf(PrimsFor(AsCpu(ctx), inputs).dst);
  }

  // Backward reads shapes only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs);
    RunMultiSource(ctx, p.concat, p.srcs, inputs, p.dst, output);
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs);
    CheckedView(p.dst, ctx, grad_output);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (grad_inputs[i].empty()) continue;
      if (!p.slices[i]) {
        p.slices[i] =
            MakePrim(dnnl::reorder::primitive_desc(ctx.engine(), p.sub[i], ctx.engine(), p.srcs[i], ScratchpadAttr()),
                     Work::kMemory);
      }
      Run(ctx, *p.slices[i],
          {{DNNL_ARG_FROM, memory(p.sub[i], ctx.engine(), grad_output.raw())},
           {DNNL_ARG_TO, CheckedView(p.srcs[i], ctx, grad_inputs[i])}});
    }
  }

 private:
  // Primitives for one list of input descriptors; the slice reorders made on first use.
  struct Prims {
    std::vector<memory::desc> srcs;  // the key
    memory::desc dst;
    Prim concat;
    std::vector<memory::desc> sub;            // [i]: input i's slice of dst
    std::vector<std::optional<Prim>> slices;  // [i]: sub[i] -> srcs[i]
  };

  // Input i's channel slices of `dst`; false when the format cannot address them.
  static bool Slices(const memory::desc& dst, const std::vector<memory::desc>& srcs, std::vector<memory::desc>& sub) {
    sub.clear();
    memory::dim offset = 0;
    for (const memory::desc& s : srcs) {
      memory::dims dims = s.dims();
      memory::dims offsets(dims.size(), 0);
      offsets[1] = offset;
      try {
        sub.push_back(dst.submemory_desc(dims, offsets));
      } catch (const dnnl::error&) {
        return false;
      }
      offset += dims[1];
    }
    return true;
  }

  Prims& PrimsFor(CpuContext& ctx, absl::Span<const Tensor> inputs) {
    const std::vector<memory::desc> srcs = DescsOf(inputs);
    for (auto& p : cache_) {
      if (p->srcs == srcs) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->srcs = srcs;
    dnnl::concat::primitive_desc pd(/*concat_dimension=*/1, srcs, ctx.engine(), ScratchpadAttr());
    if (!Slices(pd.dst_desc(), srcs, p->sub)) {
      pd = dnnl::concat::primitive_desc(PlainDesc(DimsOf(pd.dst_desc())), 1, srcs, ctx.engine(), ScratchpadAttr());
      CHECK(Slices(pd.dst_desc(), srcs, p->sub));
    }
    p->dst = pd.dst_desc();
    p->concat = MakePrim(pd, Work::kMemory);
    p->slices.resize(srcs.size());
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("concat", DeviceKind::kCpu, Concat, {});

}  // namespace
}  // namespace pstrain::cpu
