// pstrain-data validate: reads a TFRecord set as the `tfrecord` source
// would, record by record: both CRCs, the tf.train.Example, the image header
// (or the whole image with `decode`). Counts the records per label and
// lists every bad record with its file and byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::data_tool {

struct ValidateOptions {
  std::string pattern;  // glob of the files, e.g. DIR/train-*
  bool decode = false;  // decode every image fully, not just its header
};

struct ValidateReport {
  int files = 0;
  int64_t records = 0;                   // readable records
  std::map<int64_t, int64_t> per_label;  // stored label -> records
  std::vector<std::string> problems;     // "<file>: record at offset N: <why>"
};

// NOT_FOUND when the pattern matches nothing; bad records are problems, not
// errors.
absl::StatusOr<ValidateReport> Validate(const ValidateOptions& options);

// The report as printed by the tool.
std::string FormatValidateReport(const ValidateReport& report);

}  // namespace pstrain::data_tool
