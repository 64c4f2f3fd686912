#include "common/data/criteo/ctr_tf_example.h"

#include "absl/strings/str_cat.h"
#include "common/data/records/tf_example_features.h"
#include "glog/logging.h"

namespace pstrain::criteo {
namespace {

using data::FeatureMap;
using data::InvalidFeature;
using tfexample::Feature;

constexpr char kLabel[] = "label";

// The label: one int64 or float value, 0 or 1.
absl::Status GetLabel(FeatureMap& features, float* label) {
  auto it = features.find(kLabel);
  const bool is_float = it != features.end() && it->second.kind_case() == Feature::kFloatList;
  double value = -1;
  if (is_float) {
    const auto& values = it->second.float_list().value();
    if (absl::Status one = data::CheckOneValue(kLabel, values.size(), true); !one.ok()) return one;
    value = values[0];
  } else {
    int64_t v = -1;
    if (absl::Status s = data::GetInt64(features, kLabel, true, &v); !s.ok()) return s;
    value = static_cast<double>(v);
  }
  if (value != 0 && value != 1) return InvalidFeature(kLabel, absl::StrCat("expected 0 or 1, got ", value));
  *label = static_cast<float>(value);
  return absl::OkStatus();
}

absl::Status GetDense(FeatureMap& features, CriteoRecord* record) {
  for (int f = 0; f < kNumDense; ++f) {
    const std::string key = absl::StrCat("I", f + 1);
    absl::StatusOr<Feature*> feature = data::FindFeature(features, key.c_str(), Feature::kInt64List, false);
    if (!feature.ok()) return feature.status();
    if (*feature == nullptr) continue;
    const auto& values = (*feature)->int64_list().value();
    if (absl::Status one = data::CheckOneValue(key.c_str(), values.size(), false); !one.ok()) return one;
    if (!values.empty()) record->dense[f] = values[0];
  }
  return absl::OkStatus();
}

absl::Status GetBags(FeatureMap& features, CtrTfExample* example) {
  CtrBags& bags = example->bags;
  for (int f = 0; f < kNumCategorical; ++f) {
    const std::string key = absl::StrCat("C", f + 1);
    bags.begin[f] = static_cast<int32_t>(bags.ids.size());
    absl::StatusOr<Feature*> feature = data::FindFeature(features, key.c_str(), Feature::kInt64List, false);
    if (!feature.ok()) return feature.status();
    if (*feature == nullptr) continue;
    const auto& ids = (*feature)->int64_list().value();
    if (ids.size() > kMaxCtrBag) {
      return InvalidFeature(key, absl::StrCat(ids.size(), " ids, more than a bag holds (", kMaxCtrBag, ")"));
    }
    for (const int64_t id : ids) {
      if (id == -1) return InvalidFeature(key, "id -1 is reserved for a missing feature");
      bags.ids.push_back(static_cast<uint64_t>(id));
    }
    if (!ids.empty()) example->record.categorical[f] = static_cast<uint64_t>(ids[0]);
  }
  bags.begin[kNumCategorical] = static_cast<int32_t>(bags.ids.size());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CtrTfExample> ParseCtrTfExample(absl::string_view serialized) {
  tfexample::Example proto;
  if (absl::Status parsed = data::ParseExample(serialized, &proto); !parsed.ok()) return parsed;
  FeatureMap& features = *proto.mutable_features()->mutable_feature();
  CtrTfExample example;
  absl::Status status = GetLabel(features, &example.record.label);
  if (status.ok()) status = GetDense(features, &example.record);
  if (status.ok()) status = GetBags(features, &example);
  if (!status.ok()) return status;
  return example;
}

std::string SerializeCtrTfExample(const CtrTfExample& example) {
  CHECK(example.record.label == 0 || example.record.label == 1) << "label " << example.record.label;
  tfexample::Example proto;
  FeatureMap& features = *proto.mutable_features()->mutable_feature();
  data::SetInt64(features, kLabel, static_cast<int64_t>(example.record.label));
  for (int f = 0; f < kNumDense; ++f) {
    if (example.record.dense[f]) data::SetInt64(features, absl::StrCat("I", f + 1).c_str(), *example.record.dense[f]);
  }
  for (int f = 0; f < kNumCategorical; ++f) {
    const std::string key = absl::StrCat("C", f + 1);
    for (const uint64_t id : example.bags.bag(f)) data::SetInt64(features, key.c_str(), static_cast<int64_t>(id));
  }
  std::string out;
  proto.SerializeToString(&out);
  return out;
}

}  // namespace pstrain::criteo
