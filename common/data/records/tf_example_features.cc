#include "common/data/records/tf_example_features.h"

#include <climits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain::data {
namespace {

const char* KindName(tfexample::Feature::KindCase kind) {
  switch (kind) {
    case tfexample::Feature::kBytesList:
      return "a bytes list";
    case tfexample::Feature::kFloatList:
      return "a float list";
    case tfexample::Feature::kInt64List:
      return "an int64 list";
    default:
      return "no list";
  }
}

}  // namespace

absl::Status InvalidFeature(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tf.train.Example: ", key, ": ", what));
}

absl::StatusOr<tfexample::Feature*> FindFeature(FeatureMap& features, const char* key,
                                                tfexample::Feature::KindCase kind, bool required) {
  auto it = features.find(key);
  const bool unset = it == features.end() || it->second.kind_case() == tfexample::Feature::KIND_NOT_SET;
  if (unset) {
    if (required) return InvalidFeature(key, "missing");
    return nullptr;
  }
  if (it->second.kind_case() != kind) {
    return InvalidFeature(key, absl::StrCat("expected ", KindName(kind), ", got ", KindName(it->second.kind_case())));
  }
  return &it->second;
}

absl::Status CheckOneValue(const char* key, int count, bool required) {
  if (count == 1 || (count == 0 && !required)) return absl::OkStatus();
  return InvalidFeature(key, absl::StrCat("expected 1 value, got ", count));
}

absl::Status GetInt64(FeatureMap& features, const char* key, bool required, int64_t* out) {
  absl::StatusOr<tfexample::Feature*> feature = FindFeature(features, key, tfexample::Feature::kInt64List, required);
  if (!feature.ok()) return feature.status();
  if (*feature == nullptr) return absl::OkStatus();
  const auto& values = (*feature)->int64_list().value();
  absl::Status one = CheckOneValue(key, values.size(), required);
  if (one.ok() && !values.empty()) *out = values[0];
  return one;
}

absl::Status ParseExample(absl::string_view serialized, tfexample::Example* example) {
  if (serialized.size() > static_cast<size_t>(INT32_MAX) ||
      !example->ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("not a tf.train.Example (", serialized.size(), " bytes)"));
  }
  return absl::OkStatus();
}

void SetInt64(FeatureMap& features, const char* key, int64_t value) {
  features[key].mutable_int64_list()->add_value(value);
}

}  // namespace pstrain::data
