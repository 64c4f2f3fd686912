// pstrain-data convert --source image_folder: a folder of class folders
// (ImageNet's layout), each holding JPEG and PNG files. When the folder has
// train/ and validation/ subfolders, each becomes its split; otherwise the
// folder itself is the training split. Class folders are taken in name
// order (label 0 is the first); labels.txt lists their names. Images are
// stored as they are (their bytes, not re-encoded), after their headers are
// checked.
#pragma once

#include "absl/status/status.h"
#include "tools/data/convert.h"

namespace pstrain::data_tool {

absl::Status ConvertImageFolder(const ConvertOptions& options, ConvertReport* report);

}  // namespace pstrain::data_tool
