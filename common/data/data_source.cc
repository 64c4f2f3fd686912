#include "common/data/data_source.h"

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

namespace {

const bool kConfigCheck = ConfigCheckRegistry().Register(
    "data.source", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("data.source", config.data().source(), DataSourceRegistry().Names()));
      PSTRAIN_ASSIGN_OR_RETURN(DataSourceEntry entry, DataSourceRegistry().Find(config.data().source()));
      return entry.check ? entry.check(config, ck) : absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
