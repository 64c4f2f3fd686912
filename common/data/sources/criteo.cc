// criteo: click logs in Criteo's text format (common/data/criteo/
// criteo_reader.h), plain-text files under data.path: the training set is
// every file data.train_files matches, the test set every file
// data.eval_files matches, each in sorted path order, read whole into
// memory (layout: common/data/criteo/ctr_dataset.h; planted_auc NaN). A
// malformed line stops the load with "<file>:<line>: <what is wrong>".
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/criteo/criteo_reader.h"
#include "common/data/criteo/ctr_dataset.h"
#include "common/data/data_source.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// An id equal to Dataset::kMissingId would read as missing: refused.
absl::Status CheckIds(const criteo::CriteoRecord& record, const std::string& where) {
  for (int f = 0; f < criteo::kNumCategorical; ++f) {
    if (record.categorical[f] == Dataset::kMissingId) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": field ", 2 + criteo::kNumDense + f, " (C", f + 1,
                                                     "): id ffffffffffffffff is reserved for a missing feature"));
    }
  }
  return absl::OkStatus();
}

// Appends the lines of the file at `path` to `data`. Lines are parsed one at
// a time (ParseCriteoLine), CRLF tolerated, so a file is never held twice;
// errors are those ReadCriteoFile gives.
absl::Status AppendFile(const std::string& path, Dataset* data) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    absl::StatusOr<criteo::CriteoRecord> record = criteo::ParseCriteoLine(line);
    if (!record.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", number, ": ", record.status().message()));
    }
    PSTRAIN_RETURN_IF_ERROR(CheckIds(*record, absl::StrCat(path, ":", number)));
    criteo::AppendCtrExample(*record, data);
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error after line ", number));
  return absl::OkStatus();
}

absl::StatusOr<Dataset> LoadSplit(const DataConfig& d, const std::string& files) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> paths, DataFiles(d, files));
  Dataset data = criteo::MakeCtrDataset(0);
  for (const std::string& path : paths) PSTRAIN_RETURN_IF_ERROR(AppendFile(path, &data));
  return data;
}

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  const DataConfig& d = config.data();
  Datasets data;
  PSTRAIN_ASSIGN_OR_RETURN(data.train, LoadSplit(d, d.train_files()));
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(data.test, LoadSplit(d, d.eval_files()));
  }
  return data;
}

// data.path is a directory where data.train_files matches a file.
absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  return CheckDataFiles(config.data(), ck, "Criteo click-log files");
}

const bool kRegistered = DataSourceRegistry().Register("criteo", {Load, Check});

}  // namespace
}  // namespace pstrain
