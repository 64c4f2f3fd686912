// dot_interaction: DLRM's pairwise feature interaction. Attribute "features"
// (F, required, >= 2); input [N, ...] is read as [N, F*d]: F vectors of d
// floats per example (v_f = features [f*d, (f+1)*d)). Output [N, F*(F-1)/2]:
// <v_i, v_j> for i > j in DLRM's lower-triangle order (i = 1..F-1, then
// j = 0..i-1). No parameters.
//
// Backward: dv_i = sum over the pairs (i, j) of g_ij v_j (both ways: a pair
// adds g v_j to dv_i and g v_i to dv_j); the input's gradient is written,
// not accumulated.
//
// Layouts: output plain. A blocked input is converted to plain row-major
// first, and its gradient back. Plain loops over the examples, spread over
// the OpenMP threads once a batch is worth it (the same threshold as dense's
// single-thread cut-off: F = 27, d = 16 is 11 kFLOP an example).
//
// CPU only: the sparse models train on CPU workers. On cuda the type is
// registered as unavailable, so a model using it there is refused with that
// reason (naming the layer) rather than as an unknown type.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "models/layers/layer_rules.h"

namespace pstrain::cpu {
namespace {

// Below this many FLOPs a batch runs on one thread.
constexpr int64_t kSmallFlops = int64_t{1} << 24;

class DotInteraction final : public Layer {
 public:
  explicit DotInteraction(const LayerSpec& spec) : spec_(spec) {}

  absl::StatusOr<Shape> Setup(const std::vector<Shape>& input_shapes) override {
    PSTRAIN_ASSIGN_OR_RETURN(setup_, SetupDotInteraction(spec_, input_shapes));
    return setup_.output;
  }

  int64_t ForwardFlopsPerExample() const override { return setup_.ForwardFlopsPerExample(); }

  // Backward reads the input (each vector's gradient is a sum of the others).
  BackwardReads ReadsInBackward() const override { return {.inputs = true, .output = false}; }

  void Forward(DeviceContext& ctx, absl::Span<const Tensor> inputs, Tensor& output, bool training) override {
    const Tensor in = Plain(ctx, inputs[0]);
    const int64_t n = in.dim(0), f = setup_.features, d = setup_.dim, pairs = setup_.Pairs();
    const float* x = in.data();
    float* y = output.data();
#pragma omp parallel for if (n * setup_.ForwardFlopsPerExample() >= kSmallFlops)
    for (int64_t e = 0; e < n; ++e) {
      const float* v = x + e * f * d;
      float* out = y + e * pairs;
      for (int64_t i = 1; i < f; ++i) {
        for (int64_t j = 0; j < i; ++j) {
          float dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += v[i * d + c] * v[j * d + c];
          *out++ = dot;
        }
      }
    }
  }

  void Backward(DeviceContext& ctx, absl::Span<const Tensor> inputs, const Tensor& output, const Tensor& grad_output,
                absl::Span<Tensor> grad_inputs) override {
    if (grad_inputs[0].empty()) return;
    const Tensor in = Plain(ctx, inputs[0]);
    const Tensor grad = grad_inputs[0].is_plain() ? grad_inputs[0] : Tensor(inputs[0].shape());
    const int64_t n = in.dim(0), f = setup_.features, d = setup_.dim, pairs = setup_.Pairs();
    const float* x = in.data();
    const float* g = grad_output.data();
    float* dx = grad.data();
#pragma omp parallel for if (2 * n * setup_.ForwardFlopsPerExample() >= kSmallFlops)
    for (int64_t e = 0; e < n; ++e) {
      const float* v = x + e * f * d;
      const float* ge = g + e * pairs;
      float* dv = dx + e * f * d;
      std::fill(dv, dv + f * d, 0.0f);
      for (int64_t i = 1; i < f; ++i) {
        for (int64_t j = 0; j < i; ++j) {
          const float gij = *ge++;
          for (int64_t c = 0; c < d; ++c) {
            dv[i * d + c] += gij * v[j * d + c];
            dv[j * d + c] += gij * v[i * d + c];
          }
        }
      }
    }
    if (!grad_inputs[0].is_plain()) ctx.Convert(grad, grad_inputs[0]);
  }

 private:
  // `t` itself when plain; otherwise a plain row-major copy.
  static Tensor Plain(DeviceContext& ctx, const Tensor& t) {
    if (t.is_plain()) return t;
    Tensor plain(t.shape());
    ctx.Convert(t, plain);
    return plain;
  }

  const LayerSpec spec_;
  DotInteractionSetup setup_;
};

PSTRAIN_REGISTER_LAYER("dot_interaction", DeviceKind::kCpu, DotInteraction, {.ints = {"features"}, .floats = {}});
[[maybe_unused]] const bool kNoCudaDotInteraction =
    RegisterUnavailableLayer("dot_interaction", DeviceKind::kCuda,
                             "dot_interaction is implemented on CPUs only (the sparse models, dlrm and wide_deep, "
                             "train on CPU workers): use device: cpu");

}  // namespace
}  // namespace pstrain::cpu
