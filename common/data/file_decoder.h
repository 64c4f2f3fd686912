// FileDecoder: examples that are image files (data.source image_folder),
// each read and decoded when a batch needs it (image_transform.h).
#pragma once

#include <string>
#include <vector>

#include "common/data/example_decoder.h"
#include "common/data/image_folder.h"
#include "common/data/image_transform.h"

namespace pstrain {

class FileDecoder final : public ExampleDecoder {
 public:
  // `skip_corrupt`: ExampleDecoder's (a file that cannot be read or decoded).
  FileDecoder(std::vector<LabelledFile> files, ImageTransform transform, bool skip_corrupt);

  int64_t num_examples() const override { return static_cast<int64_t>(files_.size()); }
  std::string Describe() const override;

 protected:
  // Errors name the file.
  absl::StatusOr<int32_t> DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const override;

 private:
  const std::vector<LabelledFile> files_;
  const ImageTransform transform_;
};

}  // namespace pstrain
