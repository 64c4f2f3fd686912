#include "common/data/file_decoder.h"

#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {
FileDecoder::FileDecoder(std::vector<LabelledFile> files, ImageTransform transform, bool skip_corrupt)
    : ExampleDecoder(skip_corrupt), files_(std::move(files)), transform_(std::move(transform)) {}

absl::StatusOr<int32_t> FileDecoder::DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const {
  const LabelledFile& file = files_[index];
  std::ifstream in(file.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) return absl::NotFoundError(absl::StrCat(file.path, ": cannot be read"));
  if (absl::Status s = ApplyTransform(transform_, bytes, seed, train, out); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", s.message()));
  }
  return file.label;
}

std::string FileDecoder::Describe() const {
  return absl::StrCat(files_.size(), " image files, ", transform_.random_crop ? "random resized crop + flip" : "resize",
                      " to ", ShapeToString(transform_.example_shape));
}

}  // namespace pstrain
