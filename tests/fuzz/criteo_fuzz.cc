// Fuzz target: Criteo's click-log lines (common/data/criteo/criteo_reader.h).
//
// Feeds: the input as one line to ParseCriteoLine, then as the text of a
// file to ReadCriteoLines, strict and skipping malformed lines, whole and
// for the range of lines 2-3.
// Asserts: a refused line is INVALID_ARGUMENT naming the field count or a
// field ("field N (...)"); an accepted one has exactly 40 tab-separated
// fields, and FormatCriteoLine writes it as a line that parses back to the
// same record and formats the same again. The file reader returns exactly
// the records of the lines ParseCriteoLine accepts (a final "\n" ends the
// last line, a "\r" before "\n" is dropped); strict, it refuses the first
// malformed line of its range naming "fuzz.txt:<line>:"; skipping, it
// counts the malformed ones and keeps that first error.
// Seeds: tests/fuzz/corpus/criteo/ (whole and missing-value lines, bad
// fields, a short file of good, CRLF and bad lines).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "common/data/criteo/criteo_reader.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using pstrain::criteo::CriteoLines;
using pstrain::criteo::CriteoReadOptions;
using pstrain::criteo::CriteoRecord;

void CheckLine(std::string_view line) {
  const absl::StatusOr<CriteoRecord> record = pstrain::criteo::ParseCriteoLine(line);
  if (!record.ok()) {
    const absl::Status& s = record.status();
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, "refusal is not INVALID_ARGUMENT: ", s.ToString());
    const bool names = s.message().rfind("field ", 0) == 0 ||
                       s.message().find("tab-separated fields expected") != absl::string_view::npos;
    FUZZ_CHECK(names, "refusal names neither a field nor the count: ", s.ToString());
    return;
  }
  FUZZ_CHECK(std::count(line.begin(), line.end(), '\t') == pstrain::criteo::kNumFields - 1, "accepted without 39 tabs");
  const std::string formatted = pstrain::criteo::FormatCriteoLine(*record);
  const absl::StatusOr<CriteoRecord> again = pstrain::criteo::ParseCriteoLine(formatted);
  FUZZ_CHECK(again.ok(), "the formatted line is refused: ", again.status().ToString(), " for ", formatted);
  FUZZ_CHECK(*again == *record, "the formatted line parses to another record: ", formatted);
  FUZZ_CHECK(pstrain::criteo::FormatCriteoLine(*again) == formatted, "formatting is not stable: ", formatted);
}

// The text's lines: pieces between "\n"s, the empty one after a final "\n"
// (or of an empty text) not a line; each less one trailing "\r".
std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

// ReadCriteoLines over lines [first, first + count) of `lines` (the text's).
void CheckRead(std::string_view text, const std::vector<std::string>& lines, size_t first, size_t count) {
  std::vector<CriteoRecord> good;
  size_t bad = 0, first_bad = 0;
  for (size_t i = first; i < std::min(lines.size(), first + count); ++i) {
    absl::StatusOr<CriteoRecord> r = pstrain::criteo::ParseCriteoLine(lines[i]);
    if (r.ok()) good.push_back(*r);
    if (!r.ok() && bad++ == 0) first_bad = i + 1;
  }
  CriteoReadOptions options;
  options.skip_lines = static_cast<int64_t>(first);
  options.max_lines = count == SIZE_MAX ? -1 : static_cast<int64_t>(count);
  std::istringstream strict_in{std::string(text)};
  const absl::StatusOr<CriteoLines> strict = pstrain::criteo::ReadCriteoLines(strict_in, "fuzz.txt", options);
  const std::string prefix = absl::StrCat("fuzz.txt:", first_bad, ": ");
  if (bad > 0) {
    FUZZ_CHECK(!strict.ok() && strict.status().code() == absl::StatusCode::kInvalidArgument, "strict read accepted");
    FUZZ_CHECK(strict.status().message().rfind(prefix, 0) == 0, "error ", strict.status().ToString(), " not ", prefix);
  } else {
    FUZZ_CHECK(strict.ok(), "strict read refused: ", strict.status().ToString());
    FUZZ_CHECK(strict->records == good && strict->malformed_lines == 0, "strict read's records differ");
  }
  options.skip_malformed = true;
  std::istringstream skip_in{std::string(text)};
  const absl::StatusOr<CriteoLines> skip = pstrain::criteo::ReadCriteoLines(skip_in, "fuzz.txt", options);
  FUZZ_CHECK(skip.ok(), "skipping read failed: ", skip.status().ToString());
  FUZZ_CHECK(skip->records == good, "skipping read's records differ");
  FUZZ_CHECK(skip->malformed_lines == static_cast<int64_t>(bad), "counted ", skip->malformed_lines, " not ", bad);
  FUZZ_CHECK(bad == 0 ? skip->first_error.ok() : skip->first_error == strict.status(), "first error differs");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckLine(text);
  const std::vector<std::string> lines = Lines(text);
  CheckRead(text, lines, 0, SIZE_MAX);
  CheckRead(text, lines, 1, 2);
  return 0;
}
