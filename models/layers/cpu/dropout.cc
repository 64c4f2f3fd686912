// dropout: inverted dropout. Training: y = x * mask, mask[i] = 0 with
// probability `rate`, else 1 / (1 - rate), so inference is the identity.
//
// Attributes: "rate" in [0, 1) (default 0.5), "seed" (default 0). Any input
// shape and layout; output alike. No parameters.
// The mask is a deterministic function of (seed, step, buffer index): step
// counts this layer's training forwards, so each step draws a fresh mask and
// two layers (or replicas) with one seed draw the same sequence. Backward()
// applies the mask of the preceding training Forward(). Both passes multiply
// on oneDNN's binary primitive; the mask is drawn on the host.
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "device/cpu/dnnl_util.h"
#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

using dnnl::memory;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class Dropout final : public Layer {
 public:
  explicit Dropout(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupDropout(spec_, input_shapes));
    return setup_.shape;
  }

  TensorLayoutPtr OutputLayout(DeviceContext& ctx, absl::Span<const Tensor> inputs) override {
    return inputs[0].layout();
  }

  // Backward reads its mask only.
  BackwardReads ReadsInBackward() const override { return {.inputs = false, .output = false}; }

  void Forward(DeviceContext& dctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    if (!training) {
      output.CopyFrom(inputs[0]);
      return;
    }
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    DrawMask(p.mask);
    Run(ctx, p.multiply,
        {{DNNL_ARG_SRC_0, View(p.data, ctx, inputs[0])},
         {DNNL_ARG_SRC_1, View(p.data, ctx, p.mask)},
         {DNNL_ARG_DST, CheckedView(p.data, ctx, output)}});
  }

  void Backward(DeviceContext& dctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    CpuContext& ctx = AsCpu(dctx);
    Prims& p = PrimsFor(ctx, inputs[0]);
    Run(ctx, p.multiply,
        {{DNNL_ARG_SRC_0, CheckedView(p.data, ctx, grad_output)},
         {DNNL_ARG_SRC_1, View(p.data, ctx, p.mask)},
         {DNNL_ARG_DST, CheckedView(p.data, ctx, grad_inputs[0])}});
  }

 private:
  struct Prims {
    memory::desc data;  // the key: input, output, mask and gradients
    Prim multiply;
    Tensor mask;  // laid out as the input; the last training Forward()'s
  };

  Prims& PrimsFor(CpuContext& ctx, const Tensor& input) {
    const memory::desc data = DescOf(input);
    for (auto& p : cache_) {
      if (p->data == data) return *p;
    }
    auto p = std::make_unique<Prims>();
    p->data = data;
    dnnl::binary::desc d(dnnl::algorithm::binary_mul, data, data, data);
    p->multiply = MakePrim(dnnl::binary::primitive_desc(d, ScratchpadAttr(), ctx.engine()), Work::kMemory);
    p->mask = Tensor(input.shape(), input.layout());
    cache_.push_back(std::move(p));
    return *cache_.back();
  }

  // Fills the whole buffer (padding too: the input's padding is zero anyway).
  void DrawMask(const Tensor& mask) {
    const uint64_t key = SplitMix64(SplitMix64(setup_.seed) ^ step_++);
    // Keep when the top 32 random bits are >= rate * 2^32.
    const uint64_t threshold = static_cast<uint64_t>(setup_.rate * 4294967296.0);
    const float keep = static_cast<float>(1.0 / (1.0 - setup_.rate));
    float* m = mask.data();
    const int64_t n = static_cast<int64_t>(mask.num_bytes() / sizeof(float));
    for (int64_t i = 0; i < n; ++i)
      m[i] = (SplitMix64(key + static_cast<uint64_t>(i)) >> 32) >= threshold ? keep : 0.0f;
  }

  const LayerSpec spec_;
  DropoutSetup setup_;  // rate and seed
  uint64_t step_ = 0;
  std::vector<std::unique_ptr<Prims>> cache_;
};

PSTRAIN_REGISTER_LAYER("dropout", DeviceKind::kCpu, Dropout, {.ints = {"seed"}, .floats = {"rate"}});

}  // namespace
}  // namespace pstrain::cpu
