// cifar10: CIFAR-10's binary batches from data.path (common/data/
// cifar10_reader.h), held in memory as [3, 32, 32] floats in [0, 1] like the
// fashion_mnist source (about 740 MB for both splits); no augmentation.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/data/cifar10_reader.h"
#include "common/data/data_source.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  Datasets data;
  PSTRAIN_ASSIGN_OR_RETURN(data.train, LoadCifar10(config.data().path(), "train"));
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(data.test, LoadCifar10(config.data().path(), "test"));
  }
  return data;
}

// data.path holds the six batch files.
absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  const std::string& path = config.data().path();
  const std::string expected =
      "a directory holding CIFAR-10's data_batch_1.bin ... data_batch_5.bin and test_batch.bin";
  if (path.empty()) return ck.Fail("data.path", expected, "''");
  for (std::string_view split : {"train", "test"}) {
    for (const std::string& file : Cifar10Files(path, split)) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file, ec)) {
        return ck.Fail("data.path", expected, absl::StrCat("'", path, "' where ", file, " is missing"));
      }
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = DataSourceRegistry().Register("cifar10", {Load, Check});

}  // namespace
}  // namespace pstrain
