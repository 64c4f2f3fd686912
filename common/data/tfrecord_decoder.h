// TfRecordDecoder: the examples of a set of TFRecord files (one
// tf.train.Example each, common/data/records/image_example.h), decoded and
// transformed on demand (common/data/image/). The source `tfrecord`
// (common/data/sources/tfrecord.cc) makes one per split.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/example_decoder.h"
#include "common/data/image_transform.h"
#include "common/data/records/record_file.h"
#include "common/tensor.h"

namespace pstrain {

struct TfRecordDecoderOptions {
  ImageTransform transform;
  int num_classes = 0;
  int label_offset = 0;       // subtracted from each stored label
  bool skip_corrupt = false;  // ExampleDecoder's
};

class TfRecordDecoder final : public ExampleDecoder {
 public:
  TfRecordDecoder(data::RecordSet records, TfRecordDecoderOptions options);

  int64_t num_examples() const override { return records_.size(); }
  std::string Describe() const override;

 protected:
  // Errors name the record's file and offset.
  absl::StatusOr<int32_t> DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const override;

 private:
  std::string Where(int64_t index) const;

  const data::RecordSet records_;
  const TfRecordDecoderOptions options_;
};

}  // namespace pstrain
