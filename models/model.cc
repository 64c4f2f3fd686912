#include "models/model.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
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

namespace {

struct ModelRegistry {
  absl::Mutex mu;
  std::map<std::string, ModelFactory> factories ABSL_GUARDED_BY(mu);
};

ModelRegistry& Registry() {
  static ModelRegistry* registry = new ModelRegistry;  // never destroyed
  return *registry;
}

}  // namespace

bool RegisterModel(const std::string& name, ModelFactory factory) {
  ModelRegistry& r = Registry();
  absl::MutexLock lock(&r.mu);
  CHECK(r.factories.emplace(name, std::move(factory)).second) << "model \"" << name << "\" registered twice";
  return true;
}

std::vector<std::string> RegisteredModels() {
  ModelRegistry& r = Registry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : r.factories) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelConfig& config, DeviceContext* ctx) {
  ModelFactory factory;
  {
    ModelRegistry& r = Registry();
    absl::MutexLock lock(&r.mu);
    auto it = r.factories.find(config.name());
    if (it != r.factories.end()) factory = it->second;
  }
  if (!factory) {
    return absl::NotFoundError(
        absl::StrCat("unknown model \"", config.name(), "\"; known: ", absl::StrJoin(RegisteredModels(), ", ")));
  }
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

}  // namespace pstrain
