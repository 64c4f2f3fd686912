// FileDecoder: examples that are image files (data.source image_folder),
// each read and decoded when a batch needs it (image_transform.h).
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/data/example_decoder.h"
#include "common/data/image_folder.h"
#include "common/data/image_transform.h"

namespace pstrain {

class FileDecoder final : public ExampleDecoder {
 public:
  // `skip_corrupt`: a file that cannot be read or decoded is replaced by the
  // next good one and counted, instead of an error naming it.
  FileDecoder(std::vector<LabelledFile> files, ImageTransform transform, bool skip_corrupt);

  int64_t num_examples() const override { return static_cast<int64_t>(files_.size()); }
  absl::StatusOr<int32_t> Decode(int64_t index, uint64_t seed, bool train, float* out) const override;
  int64_t skipped() const override { return skipped_.load(); }
  std::string Describe() const override;

 private:
  absl::StatusOr<int32_t> DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const;

  const std::vector<LabelledFile> files_;
  const ImageTransform transform_;
  const bool skip_corrupt_;
  mutable std::atomic<int64_t> skipped_{0};
};

}  // namespace pstrain
