#include "tests/models/gradient_checker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain::testing {
namespace {

constexpr float kGarbage = 7.25f;  // pre-fills backward outputs

void FillUniform(std::mt19937_64& rng, const Tensor& t, double lo, double hi, double min_abs = 0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (float& v : t.span()) {
    do {
      v = static_cast<float>(dist(rng));
    } while (std::fabs(v) < min_abs);
  }
}

// Fills the whole buffer, padding of a laid-out tensor included.
void Fill(const Tensor& t, float value) { std::fill(t.data(), t.data() + t.num_bytes() / sizeof(float), value); }

std::string LayoutName(const TensorLayoutPtr& layout) { return layout ? layout->ToString() : "plain"; }

// Compares analytic and numeric gradients of one tensor, element by element;
// `loss` evaluates L at the tensor's current values.
template <typename LossFn>
void CheckTensor(const std::string& what, const Tensor& x, const Tensor& analytic, LossFn loss,
                 const GradientCheckOptions& options, GradientCheckReport& report) {
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    float& v = x.data()[i];
    const float saved = v;
    const float plus = static_cast<float>(saved + options.step);
    const float minus = static_cast<float>(saved - options.step);
    v = plus;
    const double l_plus = loss();
    v = minus;
    const double l_minus = loss();
    v = saved;
    const double numeric = (l_plus - l_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
    const double a = analytic.data()[i];
    const double scale = std::max({std::fabs(a), std::fabs(numeric), options.abs_floor});
    double error = std::fabs(a - numeric) / scale;
    if (std::isnan(error)) error = std::numeric_limits<double>::infinity();
    ++report.elements_checked;
    if (report.worst.empty() || error > report.max_relative_error) {
      report.max_relative_error = error;
      report.worst = absl::StrFormat("%s[%d]: analytic %.6g numeric %.6g", what, i, a, numeric);
    }
  }
}

::testing::AssertionResult Judge(const absl::StatusOr<GradientCheckReport>& report, double tolerance) {
  if (!report.ok()) return ::testing::AssertionFailure() << "gradient check could not run: " << report.status();
  if (report->max_relative_error <= tolerance) return ::testing::AssertionSuccess() << report->ToString();
  return ::testing::AssertionFailure() << "gradients differ (tolerance " << tolerance << "): " << report->ToString();
}

}  // namespace

std::string GradientCheckReport::ToString() const {
  return absl::StrFormat("max relative error %.3g over %d elements, worst at %s (output %s)", max_relative_error,
                         elements_checked, worst, output_layout.empty() ? "plain" : output_layout);
}

absl::StatusOr<GradientCheckReport> CheckLayerGradients(const LayerSpec& spec, DeviceContext& ctx,
                                                        const std::vector<Shape>& input_shapes,
                                                        const GradientCheckOptions& options) {
  if (input_shapes.empty()) return absl::InvalidArgumentError("no input shapes");
  const int64_t batch = input_shapes[0].empty() ? 0 : input_shapes[0][0];
  std::vector<Shape> per_example;
  for (const Shape& s : input_shapes) {
    if (s.empty() || s[0] != batch || batch <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("input shapes need one positive batch dim, got ", ShapeToString(s)));
    }
    per_example.emplace_back(s.begin() + 1, s.end());
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Layer> layer, CreateLayer(spec, ctx.device().kind));
  PSTRAIN_ASSIGN_OR_RETURN(Shape out_shape, layer->Setup(per_example));
  if (!options.fuse_next.type.empty() && !layer->Fuse(options.fuse_next)) {
    return absl::FailedPreconditionError(absl::StrCat(spec.type, " refused to fuse ", options.fuse_next.type));
  }
  out_shape.insert(out_shape.begin(), batch);

  std::mt19937_64 rng(options.seed);
  std::vector<Tensor> inputs;         // plain: what is perturbed
  std::vector<Tensor> device_inputs;  // what the layer reads (the same tensors when plain)
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    inputs.emplace_back(input_shapes[i]);
    FillUniform(rng, inputs.back(), -1, 1, options.input_min_abs);
    TensorLayoutPtr layout = i < options.input_layouts.size() ? options.input_layouts[i] : nullptr;
    device_inputs.push_back(layout ? Tensor(input_shapes[i], layout) : inputs.back());
  }
  for (Parameter& p : layer->parameters()) FillUniform(rng, p.value, -1, 1);
  Tensor projection(out_shape);
  FillUniform(rng, projection, -1, 1);
  Tensor output(out_shape, layer->OutputLayout(ctx, device_inputs));
  Tensor plain_output = output.is_plain() ? output : Tensor(out_shape);

  auto loss = [&]() -> double {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!device_inputs[i].is_plain()) ctx.Convert(inputs[i], device_inputs[i]);
    }
    layer->Forward(ctx, device_inputs, output, /*training=*/true);
    if (!output.is_plain()) ctx.Convert(output, plain_output);
    ctx.Synchronize();
    double l = 0;
    for (int64_t i = 0; i < plain_output.num_elements(); ++i) {
      l += double{plain_output.data()[i]} * projection.data()[i];
    }
    return l;
  };

  // Analytic gradients at the unperturbed point.
  loss();
  Tensor grad_output = projection;
  if (!output.is_plain()) {
    grad_output = Tensor(out_shape, output.layout());
    ctx.Convert(projection, grad_output);
  }
  std::vector<Tensor> grad_inputs;
  for (const Tensor& in : device_inputs) {
    grad_inputs.emplace_back(in.shape(), in.layout());
    Fill(grad_inputs.back(), kGarbage);
  }
  for (Parameter& p : layer->parameters()) Fill(p.grad, kGarbage);
  layer->Backward(ctx, device_inputs, output, grad_output, absl::MakeSpan(grad_inputs));
  for (Tensor& g : grad_inputs) {
    if (g.is_plain()) continue;
    Tensor plain(g.shape());
    ctx.Convert(g, plain);
    g = plain;
  }
  ctx.Synchronize();
  std::vector<Tensor> grad_params;
  for (Parameter& p : layer->parameters()) grad_params.push_back(p.grad.Clone());

  GradientCheckReport report;
  report.output_layout = LayoutName(output.layout());
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckTensor(absl::StrCat("input ", i), inputs[i], grad_inputs[i], loss, options, report);
  }
  for (size_t i = 0; i < grad_params.size(); ++i) {
    const Parameter& p = layer->parameters()[i];
    CheckTensor(absl::StrCat("param ", p.name), p.value, grad_params[i], loss, options, report);
  }
  return report;
}

absl::StatusOr<GradientCheckReport> CheckLossGradients(DeviceContext& ctx, int64_t batch, int64_t classes,
                                                       const GradientCheckOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LossLayer> loss_layer, CreateSoftmaxCrossEntropy(ctx.device().kind));
  std::mt19937_64 rng(options.seed);
  Tensor logits({batch, classes});
  FillUniform(rng, logits, -3, 3);
  std::vector<int32_t> labels(batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % classes);

  Tensor grad({batch, classes});
  Fill(grad, kGarbage);
  loss_layer->ForwardBackward(ctx, logits, labels.data(), &grad);
  ctx.Synchronize();
  auto loss = [&]() -> double { return loss_layer->ForwardBackward(ctx, logits, labels.data(), nullptr); };
  GradientCheckReport report;
  CheckTensor("logits", logits, grad, loss, options, report);
  return report;
}

::testing::AssertionResult LayerGradientsMatch(const LayerSpec& spec, DeviceContext& ctx,
                                               const std::vector<Shape>& input_shapes,
                                               const GradientCheckOptions& options) {
  return Judge(CheckLayerGradients(spec, ctx, input_shapes, options), options.tolerance);
}

::testing::AssertionResult LossGradientsMatch(DeviceContext& ctx, int64_t batch, int64_t classes,
                                              const GradientCheckOptions& options) {
  return Judge(CheckLossGradients(ctx, batch, classes, options), options.tolerance);
}

}  // namespace pstrain::testing
