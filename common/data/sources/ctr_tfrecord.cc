// ctr_tfrecord: click logs as tf.train.Example records in TFRecord files
// (common/data/criteo/ctr_tf_example.h: a label, I1-I13, and C1-C26 as bags
// of ids), the multi-hot form of Criteo-shaped data. The training set is
// every file under data.path that data.train_files matches, the test set
// every file data.eval_files matches, each in sorted path order, read into
// memory (layout: common/data/criteo/ctr_dataset.h; planted_auc NaN). The
// longest bag of either split is the datasets' bag_size.
//
// Two passes over each split: the first parses every record and finds the
// longest bag, the second parses again into the dataset, so the examples
// are never held twice. A record that is damaged or not such an Example
// stops the load with "<file>: record at byte <offset>: <what is wrong>";
// with data.skip_corrupt it is left out, counted and logged instead.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/criteo/ctr_dataset.h"
#include "common/data/criteo/ctr_tf_example.h"
#include "common/data/data_source.h"
#include "common/data/records/record_file.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// A split's records, the ones that parse (in order) and its longest bag.
struct Split {
  data::RecordSet records;
  std::vector<int64_t> good;
  int longest_bag = 1;
};

// Record `i` parsed; errors name its file and byte offset.
absl::StatusOr<criteo::CtrTfExample> ReadExample(const data::RecordSet& records, int64_t i, std::string* bytes) {
  absl::Status status = records.Read(i, bytes);
  absl::StatusOr<criteo::CtrTfExample> example =
      status.ok() ? criteo::ParseCtrTfExample(*bytes) : absl::StatusOr<criteo::CtrTfExample>(status);
  if (example.ok()) return example;
  const data::RecordLocation& at = records.at(i);
  return absl::Status(example.status().code(), absl::StrCat(records.file(at.file), ": record at byte ", at.offset, ": ",
                                                            example.status().message()));
}

int LongestBag(const criteo::CtrBags& bags) {
  int longest = 1;
  for (int f = 0; f < criteo::kNumCategorical; ++f) longest = std::max(longest, bags.begin[f + 1] - bags.begin[f]);
  return longest;
}

// Pass 1: which records parse, and the longest bag.
absl::StatusOr<Split> ScanSplit(const DataConfig& d, const std::string& pattern) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> paths, DataFiles(d, pattern));
  PSTRAIN_ASSIGN_OR_RETURN(data::RecordSet records, data::RecordSet::Index(std::move(paths), d.skip_corrupt()));
  Split split{std::move(records), {}, 1};
  std::string bytes;
  int64_t skipped = 0;
  for (int64_t i = 0; i < split.records.size(); ++i) {
    absl::StatusOr<criteo::CtrTfExample> example = ReadExample(split.records, i, &bytes);
    if (!example.ok()) {
      if (!d.skip_corrupt()) return example.status();
      LOG_IF(WARNING, ++skipped <= 10) << "ctr_tfrecord: skipping " << example.status().message();
      continue;
    }
    split.longest_bag = std::max(split.longest_bag, LongestBag(example->bags));
    split.good.push_back(i);
  }
  LOG_IF(WARNING, skipped > 0) << "ctr_tfrecord: " << skipped << " of " << split.records.size() << " records under "
                               << d.path() << " matching " << pattern << " skipped (data.skip_corrupt)";
  return split;
}

// Pass 2: the split's good records as a dataset of bags of `bag_size`.
absl::StatusOr<Dataset> FillSplit(const Split& split, int bag_size) {
  Dataset data = criteo::MakeCtrDataset(static_cast<int64_t>(split.good.size()), bag_size);
  std::string bytes;
  for (size_t k = 0; k < split.good.size(); ++k) {
    PSTRAIN_ASSIGN_OR_RETURN(const criteo::CtrTfExample example, ReadExample(split.records, split.good[k], &bytes));
    criteo::SetCtrExample(example.record, static_cast<int64_t>(k), &data);
    criteo::SetCtrBags(example.bags, static_cast<int64_t>(k), &data);
  }
  return data;
}

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  const DataConfig& d = config.data();
  PSTRAIN_ASSIGN_OR_RETURN(const Split train, ScanSplit(d, d.train_files()));
  std::optional<Split> test;
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(test, ScanSplit(d, d.eval_files()));
  }
  const int bag_size = std::max(train.longest_bag, test ? test->longest_bag : 1);
  Datasets data;
  PSTRAIN_ASSIGN_OR_RETURN(data.train, FillSplit(train, bag_size));
  if (test) {
    PSTRAIN_ASSIGN_OR_RETURN(data.test, FillSplit(*test, bag_size));
  }
  return data;
}

// data.path is a directory where data.train_files matches a file.
absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  return CheckDataFiles(config.data(), ck, "TFRecord files of click-log Examples");
}

const bool kRegistered = DataSourceRegistry().Register("ctr_tfrecord", {Load, Check});

}  // namespace
}  // namespace pstrain
