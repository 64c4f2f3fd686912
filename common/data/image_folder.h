// An image folder, ImageNet's layout: class folders holding JPEG and PNG
// files (by extension, any case), either directly under the folder (the
// training split alone) or under its train/ and validation/ folders. Class
// folders in name order are labels 0, 1, ...; files in name order within
// each class. Used by the image_folder source and pstrain-data convert.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

struct LabelledFile {
  std::string path;
  int label = 0;
};

struct ImageFolder {
  std::vector<std::string> classes;  // folder names, in label order
  std::vector<LabelledFile> train;
  std::vector<LabelledFile> validation;  // empty without validation/
  bool has_validation = false;
};

// NOT_FOUND when `path` is not a directory; INVALID_ARGUMENT naming the
// folder when it has no class folders or no images.
absl::StatusOr<ImageFolder> ListImageFolder(const std::string& path);

}  // namespace pstrain
