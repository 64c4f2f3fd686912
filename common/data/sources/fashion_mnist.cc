// fashion_mnist: Fashion-MNIST from data.path (Debian's dataset-fashion-mnist
// puts it in /usr/share/datasets/fashion-mnist); common/data/idx_reader.h.
#include <array>
#include <filesystem>
#include <fstream>

#include "common/data/data_source.h"
#include "common/data/idx_reader.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr std::array<absl::string_view, 4> kFiles = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  Datasets data;
  PSTRAIN_ASSIGN_OR_RETURN(data.train, LoadFashionMnist(config.data().path(), "train"));
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(data.test, LoadFashionMnist(config.data().path(), "test"));
  }
  return data;
}

// data.path holds the four files, readable.
absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  const DataConfig& d = config.data();
  const std::string expected =
      absl::StrCat("a directory holding the fashion_mnist files ", absl::StrJoin(kFiles, ", "));
  if (d.path().empty()) return ck.Fail("data.path", expected, "''");
  for (absl::string_view file : kFiles) {
    const std::filesystem::path p = std::filesystem::path(d.path()) / std::string(file);
    std::error_code ec;
    const bool regular = std::filesystem::is_regular_file(p, ec);
    if (!regular || !std::ifstream(p, std::ios::binary)) {
      return ck.Fail("data.path", expected,
                     absl::StrCat("'", d.path(), "' where ", file, regular ? " is unreadable" : " is missing"));
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = DataSourceRegistry().Register("fashion_mnist", {Load, Check});

}  // namespace
}  // namespace pstrain
