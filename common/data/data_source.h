// Data sources: where a run's examples come from (data.source), one file each
// in common/data/sources/, registered by name with the check of the fields
// they read (run by config validation: common/config/config_checks.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/config_checks.h"
#include "common/data/dataset.h"
#include "common/registry.h"
#include "proto/config.pb.h"

namespace pstrain {

struct Datasets {
  Dataset train;
  Dataset test;  // empty unless asked for
};

struct DataSourceEntry {
  // Loads the training set, and the test set when `with_test`.
  std::function<absl::StatusOr<Datasets>(const ExperimentConfig& config, bool with_test)> load;
  // Checks the data fields the source reads, files included (null: none).
  ConfigCheck check;
};

Registry<DataSourceEntry>& DataSourceRegistry();

// config.data().source()'s datasets.
absl::StatusOr<Datasets> LoadDatasets(const ExperimentConfig& config, bool with_test);

// Sources that read files (tfrecord, criteo): the files under data.path that
// `pattern` (data.train_files or data.eval_files) matches, in path order
// (data::MatchFiles: NotFound when none does).
absl::StatusOr<std::vector<std::string>> DataFiles(const DataConfig& data, const std::string& pattern);
// Their check: data.path is a directory where data.train_files matches a
// file; the refusal names the field and `what` the files are.
absl::Status CheckDataFiles(const DataConfig& data, const ConfigChecker& ck, absl::string_view what);

}  // namespace pstrain
