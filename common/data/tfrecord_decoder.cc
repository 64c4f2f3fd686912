#include "common/data/tfrecord_decoder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/records/image_example.h"

namespace pstrain {
TfRecordDecoder::TfRecordDecoder(data::RecordSet records, TfRecordDecoderOptions options)
    : ExampleDecoder(options.skip_corrupt), records_(std::move(records)), options_(std::move(options)) {}

absl::StatusOr<int32_t> TfRecordDecoder::DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const {
  std::string record;
  if (absl::Status s = records_.Read(index, &record); !s.ok()) return s;
  absl::StatusOr<data::ImageExample> example = data::ParseImageExample(record);
  if (!example.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(index), ": ", example.status().message()));
  }
  const int64_t label = example->label - options_.label_offset;
  if (label < 0 || label >= options_.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(Where(index), ": label ", example->label,
                                                   " minus data.label_offset ", options_.label_offset,
                                                   " is outside [0, ", options_.num_classes, ") (model.num_classes)"));
  }
  const absl::Status s = ApplyTransform(options_.transform, example->encoded, seed, train, out);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(Where(index), ": ", s.message()));
  return static_cast<int32_t>(label);
}

std::string TfRecordDecoder::Where(int64_t index) const { return records_.Where(index); }

std::string TfRecordDecoder::Describe() const {
  return absl::StrCat(records_.size(), " records in ", records_.files().size(), " files, ",
                      options_.transform.random_crop ? "random resized crop + flip" : "resize", " to ",
                      ShapeToString(options_.transform.example_shape));
}

}  // namespace pstrain
