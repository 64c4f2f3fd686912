#include "common/data/records/image_example.h"

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/tf_example.pb.h"

namespace pstrain::data {
namespace {

using FeatureMap = google::protobuf::Map<std::string, tfexample::Feature>;

constexpr char kEncoded[] = "image/encoded";
constexpr char kLabel[] = "image/class/label";
constexpr char kFormat[] = "image/format";
constexpr char kHeight[] = "image/height";
constexpr char kWidth[] = "image/width";
constexpr char kChannels[] = "image/channels";
constexpr std::array<const char*, 4> kBbox = {"image/object/bbox/xmin", "image/object/bbox/ymin",
                                              "image/object/bbox/xmax", "image/object/bbox/ymax"};

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

absl::Status Invalid(absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tf.train.Example: ", key, ": ", what));
}

// The feature `key` when it holds a list of `kind`: nullptr when it is
// absent (or set to no list and !required), an error when it holds another
// kind of list or is required and absent.
absl::StatusOr<tfexample::Feature*> FindFeature(FeatureMap& features, const char* key,
                                                tfexample::Feature::KindCase kind, bool required) {
  auto it = features.find(key);
  const bool unset = it == features.end() || it->second.kind_case() == tfexample::Feature::KIND_NOT_SET;
  if (unset) {
    if (required) return Invalid(key, "missing");
    return nullptr;
  }
  if (it->second.kind_case() != kind) {
    return Invalid(key, absl::StrCat("expected ", KindName(kind), ", got ", KindName(it->second.kind_case())));
  }
  return &it->second;
}

absl::Status CheckOneValue(const char* key, int count, bool required) {
  if (count == 1 || (count == 0 && !required)) return absl::OkStatus();
  return Invalid(key, absl::StrCat("expected 1 value, got ", count));
}

// An int64 key of one value into `out` (left alone when absent).
absl::Status GetInt64(FeatureMap& features, const char* key, bool required, int64_t* out) {
  absl::StatusOr<tfexample::Feature*> feature = FindFeature(features, key, tfexample::Feature::kInt64List, required);
  if (!feature.ok()) return feature.status();
  if (*feature == nullptr) return absl::OkStatus();
  const auto& values = (*feature)->int64_list().value();
  absl::Status one = CheckOneValue(key, values.size(), required);
  if (one.ok() && !values.empty()) *out = values[0];
  return one;
}

// A bytes key of one value, moved into `out` (left alone when absent).
absl::Status TakeBytes(FeatureMap& features, const char* key, bool required, std::string* out) {
  absl::StatusOr<tfexample::Feature*> feature = FindFeature(features, key, tfexample::Feature::kBytesList, required);
  if (!feature.ok()) return feature.status();
  if (*feature == nullptr) return absl::OkStatus();
  auto* values = (*feature)->mutable_bytes_list()->mutable_value();
  absl::Status one = CheckOneValue(key, values->size(), required);
  if (one.ok() && !values->empty()) out->swap(*values->Mutable(0));
  return one;
}

// The four bbox lists, interleaved into quadruples.
absl::Status GetBoxes(FeatureMap& features, std::vector<float>* bbox) {
  std::array<const google::protobuf::RepeatedField<float>*, 4> lists{};
  int present = 0;
  for (size_t c = 0; c < kBbox.size(); ++c) {
    absl::StatusOr<tfexample::Feature*> feature =
        FindFeature(features, kBbox[c], tfexample::Feature::kFloatList, false);
    if (!feature.ok()) return feature.status();
    if (*feature != nullptr) {
      lists[c] = &(*feature)->float_list().value();
      ++present;
    }
  }
  if (present == 0) return absl::OkStatus();
  for (size_t c = 0; c < kBbox.size(); ++c) {
    if (lists[c] == nullptr) return Invalid(kBbox[c], "missing while other bbox lists are present");
    if (lists[c]->size() != lists[0]->size()) {
      return Invalid(kBbox[c], absl::StrCat(lists[c]->size(), " values, but ", kBbox[0], " has ", lists[0]->size()));
    }
  }
  const int boxes = lists[0]->size();
  bbox->resize(static_cast<size_t>(boxes) * 4);
  for (int b = 0; b < boxes; ++b) {
    for (size_t c = 0; c < 4; ++c) (*bbox)[static_cast<size_t>(b) * 4 + c] = lists[c]->Get(b);
  }
  return absl::OkStatus();
}

void SetBytes(FeatureMap& features, const char* key, absl::string_view value) {
  features[key].mutable_bytes_list()->add_value(std::string(value));
}
void SetInt64(FeatureMap& features, const char* key, int64_t value) {
  features[key].mutable_int64_list()->add_value(value);
}

}  // namespace

absl::StatusOr<ImageExample> ParseImageExample(absl::string_view serialized) {
  tfexample::Example example;
  if (serialized.size() > static_cast<size_t>(INT32_MAX) ||
      !example.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return absl::InvalidArgumentError(absl::StrCat("not a tf.train.Example (", serialized.size(), " bytes)"));
  }
  FeatureMap& features = *example.mutable_features()->mutable_feature();
  ImageExample image;
  absl::Status status = TakeBytes(features, kEncoded, true, &image.encoded);
  if (status.ok()) status = GetInt64(features, kLabel, true, &image.label);
  if (status.ok()) status = TakeBytes(features, kFormat, false, &image.format);
  if (status.ok()) status = GetInt64(features, kHeight, false, &image.height);
  if (status.ok()) status = GetInt64(features, kWidth, false, &image.width);
  if (status.ok()) status = GetInt64(features, kChannels, false, &image.channels);
  if (status.ok()) status = GetBoxes(features, &image.bbox);
  if (!status.ok()) return status;
  return image;
}

std::string SerializeImageExample(const ImageExample& image) {
  tfexample::Example example;
  FeatureMap& features = *example.mutable_features()->mutable_feature();
  SetBytes(features, kEncoded, image.encoded);
  SetInt64(features, kLabel, image.label);
  if (!image.format.empty()) SetBytes(features, kFormat, image.format);
  if (image.height != 0) SetInt64(features, kHeight, image.height);
  if (image.width != 0) SetInt64(features, kWidth, image.width);
  if (image.channels != 0) SetInt64(features, kChannels, image.channels);
  const size_t boxes = image.bbox.size() / 4;
  if (boxes > 0) {
    for (size_t c = 0; c < 4; ++c) {
      auto* list = features[kBbox[c]].mutable_float_list()->mutable_value();
      for (size_t b = 0; b < boxes; ++b) list->Add(image.bbox[b * 4 + c]);
    }
  }
  std::string out;
  example.SerializeToString(&out);
  return out;
}

}  // namespace pstrain::data
