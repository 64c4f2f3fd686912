#include "tools/data/validate.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/data/records/image_example.h"
#include "common/data/records/record_file.h"
#include "common/status_macros.h"

namespace pstrain::data_tool {
namespace {

// The image of one record: its header, or all of it with `decode`.
absl::Status CheckImage(const std::string& encoded, bool decode) {
  if (!decode) return image::ReadImageInfo(encoded).status();
  return image::DecodeImage(encoded, 3).status();
}

// The records of one file that can be indexed; a bad header ends the file
// (reported), the records before it are still checked.
void ValidateFile(const std::string& file, bool decode, ValidateReport* report) {
  absl::StatusOr<data::RecordSet> strict = data::RecordSet::Index({file}, /*skip_corrupt=*/false);
  if (!strict.ok()) report->problems.push_back(std::string(strict.status().message()));
  absl::StatusOr<data::RecordSet> records =
      strict.ok() ? std::move(strict) : data::RecordSet::Index({file}, /*skip_corrupt=*/true);
  if (!records.ok()) return;  // already reported
  std::string bytes;
  for (int64_t i = 0; i < records->size(); ++i) {
    const std::string where = absl::StrCat(file, ": record at offset ", records->at(i).offset, ": ");
    if (absl::Status s = records->Read(i, &bytes); !s.ok()) {
      report->problems.push_back(std::string(s.message()));
      continue;
    }
    absl::StatusOr<data::ImageExample> example = data::ParseImageExample(bytes);
    if (!example.ok()) {
      report->problems.push_back(absl::StrCat(where, example.status().message()));
      continue;
    }
    if (absl::Status s = CheckImage(example->encoded, decode); !s.ok()) {
      report->problems.push_back(absl::StrCat(where, s.message()));
      continue;
    }
    ++report->records;
    ++report->per_label[example->label];
  }
}

}  // namespace

absl::StatusOr<ValidateReport> Validate(const ValidateOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<std::string> files, data::MatchFiles(options.pattern));
  ValidateReport report;
  report.files = static_cast<int>(files.size());
  for (const std::string& file : files) ValidateFile(file, options.decode, &report);
  return report;
}

std::string FormatValidateReport(const ValidateReport& r) {
  std::string out = absl::StrCat(r.files, " files, ", r.records, " good records, ", r.problems.size(), " bad, ",
                                 r.per_label.size(), " labels\n");
  for (const auto& [label, count] : r.per_label) absl::StrAppend(&out, "  label ", label, ": ", count, "\n");
  for (const std::string& p : r.problems) absl::StrAppend(&out, "bad: ", p, "\n");
  return out;
}

}  // namespace pstrain::data_tool
