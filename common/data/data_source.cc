#include "common/data/data_source.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/data/records/record_file.h"
#include "common/status_macros.h"

namespace pstrain {

Registry<DataSourceEntry>& DataSourceRegistry() {
  static auto* registry = new Registry<DataSourceEntry>("data.source");
  return *registry;
}

absl::StatusOr<Datasets> LoadDatasets(const ExperimentConfig& config, bool with_test) {
  PSTRAIN_ASSIGN_OR_RETURN(DataSourceEntry entry, DataSourceRegistry().Find(config.data().source()));
  return entry.load(config, with_test);
}

absl::StatusOr<std::vector<std::string>> DataFiles(const DataConfig& data, const std::string& pattern) {
  return data::MatchFiles((std::filesystem::path(data.path()) / pattern).string());
}

absl::Status CheckDataFiles(const DataConfig& data, const ConfigChecker& ck, absl::string_view what) {
  if (data.path().empty() || !std::filesystem::is_directory(data.path())) {
    return ck.Fail("data.path", absl::StrCat("a directory of ", what), absl::StrCat("'", data.path(), "'"));
  }
  if (absl::StatusOr<std::vector<std::string>> files = DataFiles(data, data.train_files()); !files.ok()) {
    return ck.Fail("data.train_files", absl::StrCat("a pattern matching ", what, " under data.path"),
                   absl::StrCat("'", data.train_files(), "' (", files.status().message(), ")"));
  }
  return absl::OkStatus();
}

namespace {

const bool kConfigCheck = ConfigCheckRegistry().Register(
    "data.source", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("data.source", config.data().source(), DataSourceRegistry().Names()));
      PSTRAIN_ASSIGN_OR_RETURN(DataSourceEntry entry, DataSourceRegistry().Find(config.data().source()));
      return entry.check ? entry.check(config, ck) : absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
