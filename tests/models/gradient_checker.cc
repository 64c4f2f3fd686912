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

bool OnHost(const DeviceContext& ctx) { return ctx.device().kind == DeviceKind::kCpu; }

// A plain host tensor (what the checker draws, perturbs and reads) and the
// tensor a layer sees: the host tensor itself on a CPU context when no layout
// is asked for, else one from ctx.Allocate() that Upload() refreshes.
struct Mirrored {
  Tensor host;
  Tensor device;
  void Upload(DeviceContext& ctx) const {
    if (device.buffer() != host.buffer()) ctx.Convert(host, device);
  }
};

Mirrored Mirror(DeviceContext& ctx, const Tensor& host, const TensorLayoutPtr& layout) {
  if (layout == nullptr && OnHost(ctx)) return {host, host};
  return {host, ctx.Allocate(host.shape(), layout)};
}

bool IsPlainHost(const Tensor& t) { return t.on_host() && t.is_plain(); }

// A plain host copy of `t` (any device, any layout).
Tensor HostCopy(DeviceContext& ctx, const Tensor& t) {
  Tensor host(t.shape());
  ctx.Convert(t, host);
  return host;
}

// Pre-fills a backward output with kGarbage (a host tensor's layout padding too).
void FillGarbage(DeviceContext& ctx, const Tensor& t) {
  if (t.on_host()) {
    Fill(t, kGarbage);
    return;
  }
  Tensor host(t.shape());
  Fill(host, kGarbage);
  ctx.Convert(host, t);
}

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
  std::vector<Mirrored> inputs;       // host: what is perturbed
  std::vector<Tensor> device_inputs;  // what the layer reads
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    Tensor host(input_shapes[i]);
    FillUniform(rng, host, -1, 1, options.input_min_abs);
    inputs.push_back(Mirror(ctx, host, i < options.input_layouts.size() ? options.input_layouts[i] : nullptr));
    device_inputs.push_back(inputs.back().device);
  }
  // Off the host the layer's parameters become device tensors, as a model's do.
  std::vector<Mirrored> params;
  for (Parameter& p : layer->parameters()) {
    FillUniform(rng, p.value, -1, 1);
    params.push_back(Mirror(ctx, p.value, nullptr));
    if (!OnHost(ctx)) {
      p.value = params.back().device;
      p.grad = ctx.Allocate(p.grad.shape());
    }
  }
  Tensor projection(out_shape);
  FillUniform(rng, projection, -1, 1);
  Tensor output = ctx.Allocate(out_shape, layer->OutputLayout(ctx, device_inputs));
  Tensor plain_output = IsPlainHost(output) ? output : Tensor(out_shape);

  auto loss = [&]() -> double {
    for (const Mirrored& in : inputs) in.Upload(ctx);
    for (const Mirrored& p : params) p.Upload(ctx);
    layer->Forward(ctx, device_inputs, output, /*training=*/true);
    if (plain_output.buffer() != output.buffer()) ctx.Convert(output, plain_output);
    ctx.Synchronize();
    double l = 0;
    for (int64_t i = 0; i < plain_output.num_elements(); ++i) {
      l += double{plain_output.data()[i]} * projection.data()[i];
    }
    return l;
  };

  // Analytic gradients at the unperturbed point.
  loss();
  const Mirrored grad_output = Mirror(ctx, projection, output.layout());
  grad_output.Upload(ctx);
  std::vector<Tensor> grad_inputs;
  for (const Tensor& in : device_inputs) {
    grad_inputs.push_back(ctx.Allocate(in.shape(), in.layout()));
    FillGarbage(ctx, grad_inputs.back());
  }
  for (Parameter& p : layer->parameters()) FillGarbage(ctx, p.grad);
  layer->Backward(ctx, device_inputs, output, grad_output.device, absl::MakeSpan(grad_inputs));
  for (Tensor& g : grad_inputs) {
    if (!IsPlainHost(g)) g = HostCopy(ctx, g);
  }
  ctx.Synchronize();
  std::vector<Tensor> grad_params;
  for (Parameter& p : layer->parameters()) {
    grad_params.push_back(p.grad.on_host() ? p.grad.Clone() : HostCopy(ctx, p.grad));
  }

  GradientCheckReport report;
  report.output_layout = LayoutName(output.layout());
  for (size_t i = 0; i < inputs.size(); ++i) {
    CheckTensor(absl::StrCat("input ", i), inputs[i].host, grad_inputs[i], loss, options, report);
  }
  for (size_t i = 0; i < grad_params.size(); ++i) {
    CheckTensor(absl::StrCat("param ", layer->parameters()[i].name), params[i].host, grad_params[i], loss, options,
                report);
  }
  return report;
}

absl::StatusOr<GradientCheckReport> CheckLossGradients(DeviceContext& ctx, int64_t batch, int64_t classes,
                                                       const GradientCheckOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LossLayer> loss_layer, CreateSoftmaxCrossEntropy(ctx.device().kind));
  std::mt19937_64 rng(options.seed);
  Tensor host_logits({batch, classes});
  FillUniform(rng, host_logits, -3, 3);
  std::vector<int32_t> labels(batch);  // host memory, as the model passes them
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % classes);

  const Mirrored logits = Mirror(ctx, host_logits, nullptr);
  logits.Upload(ctx);
  Tensor grad = ctx.Allocate({batch, classes});
  FillGarbage(ctx, grad);
  loss_layer->ForwardBackward(ctx, logits.device, labels.data(), &grad);
  if (!grad.on_host()) grad = HostCopy(ctx, grad);
  ctx.Synchronize();
  auto loss = [&]() -> double {
    logits.Upload(ctx);
    return loss_layer->ForwardBackward(ctx, logits.device, labels.data(), nullptr);
  };
  GradientCheckReport report;
  CheckTensor("logits", logits.host, grad, loss, options, report);
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
