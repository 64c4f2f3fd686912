#include "common/data/records/image_example.h"

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/data/records/tf_example_features.h"
#include "proto/tf_example.pb.h"

namespace pstrain::data {
namespace {

constexpr char kEncoded[] = "image/encoded";
constexpr char kLabel[] = "image/class/label";
constexpr char kFormat[] = "image/format";
constexpr char kHeight[] = "image/height";
constexpr char kWidth[] = "image/width";
constexpr char kChannels[] = "image/channels";
constexpr std::array<const char*, 4> kBbox = {"image/object/bbox/xmin", "image/object/bbox/ymin",
                                              "image/object/bbox/xmax", "image/object/bbox/ymax"};

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
    if (lists[c] == nullptr) return InvalidFeature(kBbox[c], "missing while other bbox lists are present");
    if (lists[c]->size() != lists[0]->size()) {
      return InvalidFeature(kBbox[c],
                            absl::StrCat(lists[c]->size(), " values, but ", kBbox[0], " has ", lists[0]->size()));
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

}  // namespace

absl::StatusOr<ImageExample> ParseImageExample(absl::string_view serialized) {
  tfexample::Example example;
  if (absl::Status parsed = ParseExample(serialized, &example); !parsed.ok()) return parsed;
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
