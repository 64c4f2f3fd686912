#include "models/model.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/config_checks.h"
#include "common/status_macros.h"
#include "device/device_registry.h"
#include "glog/logging.h"
#include "models/graph_model.h"

namespace pstrain {

int64_t Model::num_parameters() {
  int64_t n = 0;
  for (const Variable& v : variables()) n += v.value.num_elements();
  return n;
}

struct ModelBuilder::Impl {
  std::string name;
  Shape input_shape;
  int num_classes;
  DeviceContext* ctx;
  std::vector<GraphNodeSpec> nodes;  // nodes[0] is the input
  absl::Status error;                // the first problem Add() saw
  bool finished = false;
};

ModelBuilder::ModelBuilder(std::string model_name, Shape input_shape, int num_classes, DeviceContext* ctx)
    : impl_(new Impl{std::move(model_name), std::move(input_shape), num_classes, ctx, {}, {}, false}) {
  impl_->nodes.push_back({"input", {}, {}});
}

ModelBuilder::~ModelBuilder() = default;

int ModelBuilder::Add(const std::string& name, const LayerSpec& spec, std::vector<int> inputs) {
  const int id = static_cast<int>(impl_->nodes.size());
  if (impl_->error.ok()) {
    if (inputs.empty()) {
      impl_->error =
          absl::InvalidArgumentError(absl::StrCat("model \"", impl_->name, "\": layer \"", name, "\" has no inputs"));
    }
    for (int in : inputs) {
      if (in < 0 || in >= id) {
        impl_->error = absl::InvalidArgumentError(absl::StrCat("model \"", impl_->name, "\": layer \"", name,
                                                               "\" reads node ", in, ", which is not before it"));
      }
    }
  }
  impl_->nodes.push_back({name, spec, std::move(inputs)});
  return id;
}

int ModelBuilder::Then(const std::string& name, const LayerSpec& spec) {
  return Add(name, spec, {static_cast<int>(impl_->nodes.size()) - 1});
}

absl::StatusOr<std::unique_ptr<Model>> ModelBuilder::Finish(int logits_node) {
  CHECK(!impl_->finished) << "ModelBuilder::Finish called twice";
  impl_->finished = true;
  PSTRAIN_RETURN_IF_ERROR(impl_->error);
  return BuildGraphModel(std::move(impl_->name), std::move(impl_->input_shape), impl_->num_classes, impl_->ctx,
                         std::move(impl_->nodes), logits_node);
}

Registry<ModelFactory>& ModelRegistry() {
  static auto* registry = new Registry<ModelFactory>("model");
  return *registry;
}

bool RegisterModel(const std::string& name, ModelFactory factory) {
  return ModelRegistry().Register(name, std::move(factory));
}

std::vector<std::string> RegisteredModels() { return ModelRegistry().Names(); }

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelConfig& config, DeviceContext* ctx) {
  PSTRAIN_ASSIGN_OR_RETURN(ModelFactory factory, ModelRegistry().Find(config.name()));
  const std::string where = absl::StrCat("model \"", config.name(), "\": ");
  if (config.input_shape_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "input_shape is required"));
  }
  for (int d : config.input_shape()) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "input_shape must be positive, got [", absl::StrJoin(config.input_shape(), ","), "]"));
    }
  }
  if (!config.has_num_classes() || config.num_classes() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "num_classes is required and must be positive"));
  }
  if (ctx == nullptr) return absl::InvalidArgumentError(absl::StrCat(where, "no device context"));
  return factory(config, ctx);
}

namespace {

// model.name: one of the zoo's models.
const bool kConfigCheck =
    ConfigCheckRegistry().Register("model.name", [](const ExperimentConfig& config, const ConfigChecker& ck) {
      return ck.OneOf("model.name", config.model().name(), RegisteredModels());
    });

// Whether the workers' device can compute in `precision` here (the worker's
// own check runs on the machine it trains on).
[[maybe_unused]] const bool kPrecisionCheckRegistered =
    ConfigCheckRegistry().Register("precision", [](const ExperimentConfig& config, const ConfigChecker& ck) {
      const std::string& name = ExperimentConfig::Precision_Name(config.precision());
      const Precision precision = *ParsePrecision(name);
      if (precision == Precision::kFp32) return absl::OkStatus();
      // Only devices that compute for real (not emulated ones, which borrow the CPU).
      const absl::StatusOr<DeviceEntry> device = DeviceRegistry().Find(config.device());
      if (!device.ok() || device->create == nullptr) {
        return ck.Fail("precision", absl::StrCat("fp32 with device ", config.device()), absl::StrCat("'", name, "'"));
      }
      const absl::Status supported = CheckPrecision(device->kind, precision);
      if (supported.ok()) return supported;
      return ck.Fail("precision", absl::StrCat("a precision device ", config.device(), " can compute in here"),
                     absl::StrCat("'", name, "' (", supported.message(), ")"));
    });

}  // namespace
}  // namespace pstrain
