#include "common/data/image_folder.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

bool IsImageFile(const fs::path& p) {
  const std::string ext = absl::AsciiStrToLower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> ClassNames(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory()) names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<LabelledFile> ListImages(const fs::path& dir, const std::vector<std::string>& classes) {
  std::vector<LabelledFile> files;
  for (size_t c = 0; c < classes.size(); ++c) {
    if (!fs::is_directory(dir / classes[c])) continue;
    std::vector<std::string> in_class;
    for (const auto& entry : fs::directory_iterator(dir / classes[c])) {
      if (entry.is_regular_file() && IsImageFile(entry.path())) in_class.push_back(entry.path().string());
    }
    std::sort(in_class.begin(), in_class.end());
    for (std::string& f : in_class) files.push_back({std::move(f), static_cast<int>(c)});
  }
  return files;
}

}  // namespace

absl::StatusOr<ImageFolder> ListImageFolder(const std::string& path) {
  const fs::path root(path);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return absl::NotFoundError(absl::StrCat(path, " is not a directory"));
  ImageFolder folder;
  folder.has_validation = fs::is_directory(root / "train") && fs::is_directory(root / "validation");
  const fs::path train = folder.has_validation ? root / "train" : root;
  folder.classes = ClassNames(train);
  if (folder.classes.empty())
    return absl::InvalidArgumentError(absl::StrCat(train.string(), " holds no class folders"));
  folder.train = ListImages(train, folder.classes);
  if (folder.train.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(train.string(), " holds no JPEG or PNG files in its class folders"));
  }
  if (folder.has_validation) folder.validation = ListImages(root / "validation", folder.classes);
  return folder;
}

}  // namespace pstrain
