// Writes one split of a dataset as class folders, ImageNet's layout, which
// the image_folder source reads (common/data/image_folder.h):
// <out>/<split>/<class folder>/<split>-<index>.<jpg|png>. Class folders are
// named "<label, two digits>-<class name>" ('/' and spaces as '_') so their
// name order is the label order. Each file is written as <name>.tmp and
// renamed once complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/data/shard_writer.h"

namespace pstrain::data_tool {

// `classes` names label 0, 1, ...; every example's label must index it.
// Returns the bytes written; errors name the file or the bad label.
absl::StatusOr<int64_t> WriteClassFolders(const SplitSource& split, const std::vector<std::string>& classes,
                                          const std::string& out);

}  // namespace pstrain::data_tool
