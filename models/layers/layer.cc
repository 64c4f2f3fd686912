#include "models/layers/layer.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/registry.h"
#include "glog/logging.h"
#include "models/layers/layer_rules.h"

namespace pstrain {
namespace {

struct LayerEntry {
  LayerFactory create;
  LayerAttributes attributes;
};

Registry<LayerEntry>& LayerRegistry(DeviceKind kind) {
  static auto* cpu = new Registry<LayerEntry>("layer type for cpu");
  static auto* cuda = new Registry<LayerEntry>("layer type for cuda");
  return kind == DeviceKind::kCpu ? *cpu : *cuda;
}

std::map<DeviceKind, LossFactory>& Losses() {
  static auto* losses = new std::map<DeviceKind, LossFactory>;
  return *losses;
}

}  // namespace

int64_t LayerSpec::GetInt(const std::string& key, int64_t fallback) const {
  auto it = ints.find(key);
  return it == ints.end() || it->second.empty() ? fallback : it->second.front();
}

std::vector<int64_t> LayerSpec::GetInts(const std::string& key, std::vector<int64_t> fallback) const {
  auto it = ints.find(key);
  return it == ints.end() ? fallback : it->second;
}

double LayerSpec::GetFloat(const std::string& key, double fallback) const {
  auto it = floats.find(key);
  return it == floats.end() ? fallback : it->second;
}

bool RegisterLayer(const std::string& type, DeviceKind kind, LayerFactory factory, LayerAttributes attributes) {
  for (DeviceKind other : {DeviceKind::kCpu, DeviceKind::kCuda}) {
    if (other == kind) continue;
    const absl::StatusOr<LayerEntry> there = LayerRegistry(other).Find(type);
    CHECK(!there.ok() || there->attributes == attributes)
        << "layer type '" << type << "' reads other attributes on " << Device{other, 0}.ToString() << " than on "
        << Device{kind, 0}.ToString() << " (their registrations must agree)";
  }
  return LayerRegistry(kind).Register(type, {std::move(factory), std::move(attributes)});
}

bool RegisterUnavailableLayer(const std::string& type, DeviceKind kind, std::string reason) {
  return LayerRegistry(kind).RegisterUnavailable(type, std::move(reason));
}

absl::StatusOr<LayerAttributes> AttributesOf(const std::string& type, DeviceKind kind) {
  PSTRAIN_ASSIGN_OR_RETURN(const LayerEntry entry, LayerRegistry(kind).Find(type));
  return entry.attributes;
}

std::vector<std::string> RegisteredLayerTypes(DeviceKind kind) { return LayerRegistry(kind).Names(); }

absl::StatusOr<std::unique_ptr<Layer>> CreateLayer(const LayerSpec& spec, DeviceKind kind) {
  PSTRAIN_ASSIGN_OR_RETURN(const LayerEntry entry, LayerRegistry(kind).Find(spec.type));
  PSTRAIN_RETURN_IF_ERROR(CheckLayerAttributes(spec, entry.attributes));
  return entry.create(spec);
}

bool RegisterSoftmaxCrossEntropy(DeviceKind kind, LossFactory factory) {
  return Losses().emplace(kind, std::move(factory)).second;
}

absl::StatusOr<std::unique_ptr<LossLayer>> CreateSoftmaxCrossEntropy(DeviceKind kind) {
  const auto it = Losses().find(kind);
  if (it == Losses().end()) {
    return absl::UnimplementedError(
        absl::StrCat("softmax cross-entropy on ", Device{kind, 0}.ToString(), ": not in this build (CUDA?)"));
  }
  return it->second();
}

}  // namespace pstrain
