#include "common/data/cifar10_reader.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

constexpr int kPixels = 3 * 32 * 32;

absl::Status AppendFile(const std::string& path, Dataset* data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return AppendCifar10Records(bytes, path, data);
}

}  // namespace

absl::Status AppendCifar10Records(std::string_view bytes, const std::string& path, Dataset* data) {
  if (bytes.size() % kCifar10RecordBytes != 0) {
    return absl::DataLossError(absl::StrCat(path, ": ", bytes.size(), " bytes is not a whole number of ",
                                            kCifar10RecordBytes, "-byte records (truncated?)"));
  }
  const size_t records = bytes.size() / kCifar10RecordBytes;
  const auto* all = reinterpret_cast<const uint8_t*>(bytes.data());
  for (size_t r = 0; r < records; ++r) {
    if (all[r * kCifar10RecordBytes] > 9) {
      return absl::DataLossError(absl::StrCat(path, ": record at offset ", r * kCifar10RecordBytes, " has label ",
                                              static_cast<int>(all[r * kCifar10RecordBytes]), ", outside 0-9"));
    }
  }
  data->images.reserve(data->images.size() + records * kPixels);
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* record = all + r * kCifar10RecordBytes;
    data->labels.push_back(record[0]);
    for (int i = 1; i <= kPixels; ++i) data->images.push_back(record[i] * (1.0f / 255.0f));
  }
  data->num_examples += static_cast<int64_t>(records);
  return absl::OkStatus();
}

std::vector<std::string> Cifar10Files(const std::string& dir, std::string_view split) {
  const fs::path nested = fs::path(dir) / "cifar-10-batches-bin";
  const fs::path base = fs::is_directory(nested) ? nested : fs::path(dir);
  std::vector<std::string> files;
  if (split == "test") {
    files.push_back((base / "test_batch.bin").string());
  } else {
    for (int i = 1; i <= 5; ++i) files.push_back((base / absl::StrCat("data_batch_", i, ".bin")).string());
  }
  return files;
}

absl::StatusOr<Dataset> LoadCifar10(const std::string& dir, std::string_view split) {
  if (split != "train" && split != "test") {
    return absl::InvalidArgumentError(
        absl::StrCat("cifar10: unknown split '", std::string(split), "' (train or test)"));
  }
  Dataset data;
  data.example_shape = {3, 32, 32};
  data.num_classes = 10;
  for (const std::string& file : Cifar10Files(dir, split)) {
    if (absl::Status s = AppendFile(file, &data); !s.ok()) return s;
  }
  return data;
}

}  // namespace pstrain
