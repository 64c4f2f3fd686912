// Reader for CIFAR-10's binary version (cifar-10-binary.tar.gz, unpacked):
// data_batch_1.bin ... data_batch_5.bin (training, 50,000 images) and
// test_batch.bin (10,000), each a sequence of 3,073-byte records: the label
// (0-9), then the 32x32 image as 1,024 red, 1,024 green and 1,024 blue
// bytes, rows top to bottom.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"

namespace pstrain {

inline constexpr int kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Loads split "train" or "test" from `dir` (or from its
// cifar-10-batches-bin/ folder, as the archive unpacks). The result has
// example_shape [3, 32, 32], 10 classes, pixels / 255, held in memory. Errors
// name the file: NOT_FOUND for a missing one, DATA_LOSS for a size that is
// not whole records or a label outside 0-9 (with the record's offset),
// INVALID_ARGUMENT for an unknown split.
absl::StatusOr<Dataset> LoadCifar10(const std::string& dir, std::string_view split);

// Appends the records of one file's `bytes` (named `name` in errors) to
// `data`: DATA_LOSS for a size that is not whole records or a label outside
// 0-9, naming the record's offset; nothing appended then.
absl::Status AppendCifar10Records(std::string_view bytes, const std::string& name, Dataset* data);

// The files of `split` under `dir` (existing or not), in order.
std::vector<std::string> Cifar10Files(const std::string& dir, std::string_view split);

}  // namespace pstrain
