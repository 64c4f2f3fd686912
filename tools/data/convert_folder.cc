#include "tools/data/convert_folder.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/status_macros.h"
#include "tools/data/shard_writer.h"

namespace pstrain::data_tool {
namespace fs = std::filesystem;
namespace {

using LabelledFiles = std::vector<std::pair<std::string, int>>;

bool IsImageFile(const fs::path& p) {
  const std::string ext = absl::AsciiStrToLower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// The class folders of `dir`, in name order.
std::vector<std::string> ClassNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every image file under dir/<class>/ for the given classes, in name order.
LabelledFiles ListImages(const fs::path& dir, const std::vector<std::string>& classes) {
  LabelledFiles files;
  for (size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> in_class;
    if (!fs::is_directory(dir / classes[c])) continue;
    for (const auto& entry : fs::directory_iterator(dir / classes[c])) {
      if (entry.is_regular_file() && IsImageFile(entry.path())) in_class.push_back(entry.path().string());
    }
    std::sort(in_class.begin(), in_class.end());
    for (std::string& f : in_class) files.emplace_back(std::move(f), static_cast<int>(c));
  }
  return files;
}

absl::StatusOr<data::ImageExample> ReadExample(const std::pair<std::string, int>& file) {
  data::ImageExample example;
  std::ifstream in(file.first, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.first));
  example.encoded.assign(std::istreambuf_iterator<char>(in), {});
  absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(example.encoded);
  if (!info.ok()) return absl::InvalidArgumentError(absl::StrCat(file.first, ": ", info.status().message()));
  example.format = info->format == image::ImageFormat::kPng ? "PNG" : "JPEG";
  example.label = file.second;
  example.height = info->height;
  example.width = info->width;
  return example;
}

absl::StatusOr<int64_t> WriteFiles(const std::string& split, const LabelledFiles& files, int shards,
                                   const std::string& out) {
  const SplitSource source{split, static_cast<int64_t>(files.size()),
                           [&files](int64_t i) { return ReadExample(files[i]); }};
  return WriteShards(source, shards, out);
}

}  // namespace

absl::Status ConvertImageFolder(const ConvertOptions& o, ConvertReport* report) {
  const fs::path root(o.path);
  if (!fs::is_directory(root)) return absl::NotFoundError(absl::StrCat("--path ", o.path, " is not a directory"));
  const bool split = fs::is_directory(root / "train") && fs::is_directory(root / "validation");
  const fs::path train_dir = split ? root / "train" : root;
  const std::vector<std::string> classes = ClassNames(train_dir);
  if (classes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(train_dir.string(), " holds no class folders"));
  }
  const LabelledFiles train = ListImages(train_dir, classes);
  if (train.empty()) return absl::InvalidArgumentError(absl::StrCat(train_dir.string(), " holds no JPEG or PNG"));
  PSTRAIN_ASSIGN_OR_RETURN(int64_t bytes, WriteFiles("train", train, o.train_shards, o.out));
  report->train_examples = static_cast<int64_t>(train.size());
  if (split) {
    const LabelledFiles validation = ListImages(root / "validation", classes);
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t more, WriteFiles("validation", validation, o.validation_shards, o.out));
    bytes += more;
    report->validation_examples = static_cast<int64_t>(validation.size());
  }
  report->bytes_written += bytes;
  report->num_classes = static_cast<int>(classes.size());
  std::ofstream labels(fs::path(o.out) / "labels.txt");
  for (const std::string& c : classes) labels << c << "\n";
  return labels ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", o.out, "/labels.txt"));
}

}  // namespace pstrain::data_tool
