#include "models/layers/layer_rules.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// InvalidArgument unless layer `type` was given exactly one input.
absl::Status CheckOneInput(absl::string_view type, const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(type, " takes 1 input, got ", input_shapes.size()));
  }
  return absl::OkStatus();
}

// A parameter whose value and grad are zero-filled tensors of `shape`.
Parameter ZeroParameter(const char* name, const Shape& shape, Initializer init, int64_t fan_in, int64_t fan_out) {
  return {name, Tensor(shape), Tensor(shape), init, fan_in, fan_out};
}

}  // namespace

int64_t Conv2dSetup::ForwardFlopsPerExample() const {
  return 2 * NumElements(output) * InputChannelsPerGroup() * window.kh * window.kw;
}

absl::StatusOr<Conv2dSetup> SetupConv2d(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                        std::vector<Parameter>* parameters) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("conv2d", input_shapes));
  const Shape& in = input_shapes[0];
  Conv2dSetup s;
  s.filters = spec.GetInt("filters", -1);
  s.groups = spec.GetInt("groups", 1);
  const int64_t bias = spec.GetInt("bias", 1);
  if (s.filters <= 0) return absl::InvalidArgumentError("conv2d needs a positive \"filters\" attribute");
  if (bias != 0 && bias != 1) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d \"bias\" must be 0 or 1, got ", bias));
  }
  s.has_bias = bias == 1;
  PSTRAIN_ASSIGN_OR_RETURN(s.window, ReadWindow(spec, "conv2d", {1, 1}));
  PSTRAIN_RETURN_IF_ERROR(CheckWindowFits("conv2d", s.window, in));
  if (s.groups <= 0 || in[0] % s.groups != 0 || s.filters % s.groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat("conv2d groups ", s.groups, " must divide both the input channels (",
                                                   ShapeToString(in), ") and filters ", s.filters));
  }
  s.input = in;
  s.output = {s.filters, s.window.OutH(in[1]), s.window.OutW(in[2])};
  const int64_t kernel_area = s.window.kh * s.window.kw;
  const int64_t fan_in = s.InputChannelsPerGroup() * kernel_area;
  const int64_t fan_out = s.filters / s.groups * kernel_area;
  parameters->push_back(ZeroParameter("weights", {s.filters, s.InputChannelsPerGroup(), s.window.kh, s.window.kw},
                                      Initializer::kHeNormal, fan_in, fan_out));
  if (s.has_bias) parameters->push_back(ZeroParameter("bias", {s.filters}, Initializer::kZeros, fan_in, fan_out));
  return s;
}

absl::StatusOr<DenseSetup> SetupDense(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                      std::vector<Parameter>* parameters) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("dense", input_shapes));
  DenseSetup s;
  s.units = spec.GetInt("units", -1);
  if (s.units <= 0) return absl::InvalidArgumentError("dense needs a positive \"units\" attribute");
  s.in_features = NumElements(input_shapes[0]);
  if (input_shapes[0].empty() || s.in_features <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense input must be non-empty, got ", ShapeToString(input_shapes[0])));
  }
  s.output = {s.units};
  parameters->push_back(
      ZeroParameter("weights", {s.in_features, s.units}, Initializer::kGlorotUniform, s.in_features, s.units));
  parameters->push_back(ZeroParameter("bias", {s.units}, Initializer::kZeros, s.in_features, s.units));
  return s;
}

absl::StatusOr<BatchNormSetup> SetupBatchNorm(const LayerSpec& spec, const std::vector<Shape>& input_shapes,
                                              std::vector<Parameter>* parameters) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("batch_norm", input_shapes));
  const Shape& in = input_shapes[0];
  if ((in.size() != 1 && in.size() != 3) || NumElements(in) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_norm input must be [channels, height, width] or [channels], got ", ShapeToString(in)));
  }
  BatchNormSetup s;
  s.epsilon = static_cast<float>(spec.GetFloat("epsilon", 1e-3));
  s.momentum = static_cast<float>(spec.GetFloat("momentum", 0.9));
  if (!(s.epsilon > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("batch_norm epsilon must be > 0, got ", s.epsilon));
  }
  if (!(s.momentum >= 0 && s.momentum <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("batch_norm momentum must be in [0, 1], got ", s.momentum));
  }
  s.shape = in;
  s.channels = in[0];
  s.spatial = NumElements(in) / s.channels;
  parameters->push_back(ZeroParameter("gamma", {s.channels}, Initializer::kOnes, s.channels, s.channels));
  parameters->push_back(ZeroParameter("beta", {s.channels}, Initializer::kZeros, s.channels, s.channels));
  return s;
}

absl::StatusOr<LrnSetup> SetupLrn(const LayerSpec& spec, const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("lrn", input_shapes));
  const Shape& in = input_shapes[0];
  if (in.size() != 3 || NumElements(in) <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lrn input must be [channels, height, width], got ", ShapeToString(in)));
  }
  LrnSetup s;
  s.size = spec.GetInt("size", 5);
  s.alpha = static_cast<float>(spec.GetFloat("alpha", 1e-4));
  s.beta = static_cast<float>(spec.GetFloat("beta", 0.75));
  s.k = static_cast<float>(spec.GetFloat("k", 1.0));
  if (s.size <= 0) return absl::InvalidArgumentError(absl::StrCat("lrn size must be positive, got ", s.size));
  if (!(s.k > 0) || !(s.alpha >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("lrn needs k > 0 and alpha >= 0, got k ", s.k, " alpha ", s.alpha));
  }
  s.shape = in;
  return s;
}

absl::StatusOr<DropoutSetup> SetupDropout(const LayerSpec& spec, const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("dropout", input_shapes));
  DropoutSetup s;
  s.rate = spec.GetFloat("rate", 0.5);
  s.seed = static_cast<uint64_t>(spec.GetInt("seed", 0));
  if (!(s.rate >= 0 && s.rate < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("dropout rate must be in [0, 1), got ", s.rate));
  }
  s.shape = input_shapes[0];
  return s;
}

absl::StatusOr<PoolingSetup> SetupPooling(const LayerSpec& spec, const std::string& type,
                                          const std::vector<Shape>& input_shapes, bool global) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput(type, input_shapes));
  const Shape& in = input_shapes[0];
  PoolingSetup s;
  PSTRAIN_ASSIGN_OR_RETURN(s.window, ReadPoolingWindow(spec, type, in, global));
  s.input = in;
  s.output = {in[0], s.window.OutH(in[1]), s.window.OutW(in[2])};
  return s;
}

absl::StatusOr<Shape> SetupRelu(const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("relu", input_shapes));
  return input_shapes[0];
}

absl::StatusOr<Shape> SetupFlatten(const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("flatten", input_shapes));
  return Shape{NumElements(input_shapes[0])};
}

absl::StatusOr<Shape> SetupAdd(const std::vector<Shape>& input_shapes) {
  if (input_shapes.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("add takes 2 or more inputs, got ", input_shapes.size()));
  }
  for (size_t i = 1; i < input_shapes.size(); ++i) {
    if (input_shapes[i] != input_shapes[0]) {
      return absl::InvalidArgumentError(absl::StrCat("add inputs differ in shape: ", ShapeToString(input_shapes[0]),
                                                     " vs ", ShapeToString(input_shapes[i])));
    }
  }
  return input_shapes[0];
}

absl::StatusOr<Shape> SetupConcat(const std::vector<Shape>& input_shapes) {
  if (input_shapes.empty()) return absl::InvalidArgumentError("concat takes 1 or more inputs, got 0");
  std::vector<std::string> shapes;
  for (const Shape& s : input_shapes) shapes.push_back(ShapeToString(s));
  Shape out = input_shapes[0];
  if (out.empty() || NumElements(out) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("concat inputs must be non-empty, got ", shapes[0]));
  }
  for (size_t i = 1; i < input_shapes.size(); ++i) {
    const Shape& s = input_shapes[i];
    if (s.size() != out.size() || NumElements(s) <= 0 || !std::equal(s.begin() + 1, s.end(), out.begin() + 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("concat inputs must agree in all but the channel dim, got ", absl::StrJoin(shapes, " and ")));
    }
    out[0] += s[0];
  }
  return out;
}

absl::StatusOr<SliceSetup> SetupSlice(const LayerSpec& spec, const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("slice", input_shapes));
  const Shape& in = input_shapes[0];
  SliceSetup s;
  s.begin = spec.GetInt("begin", 0);
  s.size = spec.GetInt("size", -1);
  s.in_features = NumElements(in);
  if (in.empty() || s.in_features <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("slice input must be non-empty, got ", ShapeToString(in)));
  }
  if (s.begin < 0) return absl::InvalidArgumentError(absl::StrCat("slice \"begin\" must be >= 0, got ", s.begin));
  if (s.size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("slice needs a positive \"size\" attribute, got ", s.size));
  }
  if (s.begin + s.size > s.in_features) {
    return absl::InvalidArgumentError(absl::StrCat("slice of features [", s.begin, ", ", s.begin + s.size,
                                                   ") runs past the input's ", s.in_features, " features (",
                                                   ShapeToString(in), ")"));
  }
  s.output = {s.size};
  return s;
}

absl::StatusOr<DotInteractionSetup> SetupDotInteraction(const LayerSpec& spec, const std::vector<Shape>& input_shapes) {
  PSTRAIN_RETURN_IF_ERROR(CheckOneInput("dot_interaction", input_shapes));
  const Shape& in = input_shapes[0];
  DotInteractionSetup s;
  s.features = spec.GetInt("features", -1);
  if (s.features < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("dot_interaction needs a \"features\" attribute >= 2, got ", s.features));
  }
  const int64_t k = NumElements(in);
  if (in.empty() || k <= 0 || k % s.features != 0) {
    return absl::InvalidArgumentError(absl::StrCat("dot_interaction input ", ShapeToString(in), " (", k,
                                                   " values) does not split into ", s.features,
                                                   " vectors of equal length"));
  }
  s.dim = k / s.features;
  s.output = {s.Pairs()};
  return s;
}

void CheckLogitsAndLabels(const Tensor& logits, const int32_t* labels) {
  CHECK_EQ(logits.rank(), 2) << "logits must be [N, classes], got " << ShapeToString(logits.shape());
  const int64_t n = logits.dim(0), classes = logits.dim(1);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(labels[i] >= 0 && labels[i] < classes)
        << "label " << labels[i] << " of example " << i << " is outside [0, " << classes << ")";
  }
}

absl::Status CheckLayerAttributes(const LayerSpec& spec, const LayerAttributes& known) {
  auto reads = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  auto unknown = [&](const std::string& name, const char* kind) {
    std::vector<std::string> all = known.ints;
    all.insert(all.end(), known.floats.begin(), known.floats.end());
    std::sort(all.begin(), all.end());
    return absl::InvalidArgumentError(
        absl::StrCat(spec.type, ": unknown ", kind, " attribute \"", name, "\"; ", spec.type,
                     all.empty() ? " takes no attributes" : absl::StrCat(" reads ", absl::StrJoin(all, ", "))));
  };
  for (const auto& [name, values] : spec.ints) {
    if (reads(known.floats, name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.type, ": attribute \"", name, "\" is a float; give it with Float(), not Int()"));
    }
    if (!reads(known.ints, name)) return unknown(name, "integer");
  }
  for (const auto& [name, value] : spec.floats) {
    if (reads(known.ints, name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.type, ": attribute \"", name, "\" is an integer; give it with Int(), not Float()"));
    }
    if (!reads(known.floats, name)) return unknown(name, "float");
  }
  return absl::OkStatus();
}

}  // namespace pstrain
