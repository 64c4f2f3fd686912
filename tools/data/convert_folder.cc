#include "tools/data/convert_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/data/image_folder.h"
#include "common/status_macros.h"
#include "tools/data/shard_writer.h"

namespace pstrain::data_tool {
namespace fs = std::filesystem;
namespace {

absl::StatusOr<data::ImageExample> ReadExample(const LabelledFile& file) {
  data::ImageExample example;
  std::ifstream in(file.path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.path));
  example.encoded.assign(std::istreambuf_iterator<char>(in), {});
  absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(example.encoded);
  if (!info.ok()) return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", info.status().message()));
  example.format = info->format == image::ImageFormat::kPng ? "PNG" : "JPEG";
  example.label = file.label;
  example.height = info->height;
  example.width = info->width;
  return example;
}

absl::StatusOr<int64_t> WriteFiles(const std::string& split, const std::vector<LabelledFile>& files, int shards,
                                   const std::string& out) {
  const SplitSource source{split, static_cast<int64_t>(files.size()),
                           [&files](int64_t i) { return ReadExample(files[i]); }};
  return WriteShards(source, shards, out);
}

}  // namespace

absl::Status ConvertImageFolder(const ConvertOptions& o, ConvertReport* report) {
  PSTRAIN_ASSIGN_OR_RETURN(const ImageFolder folder, ListImageFolder(o.path));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes, WriteFiles("train", folder.train, o.train_shards, o.out));
  report->train_examples = static_cast<int64_t>(folder.train.size());
  if (folder.has_validation) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t more,
                             WriteFiles("validation", folder.validation, o.validation_shards, o.out));
    bytes += more;
    report->validation_examples = static_cast<int64_t>(folder.validation.size());
  }
  report->bytes_written += bytes;
  report->num_classes = static_cast<int>(folder.classes.size());
  std::ofstream labels(fs::path(o.out) / "labels.txt");
  for (const std::string& c : folder.classes) labels << c << "\n";
  return labels ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", o.out, "/labels.txt"));
}

}  // namespace pstrain::data_tool
