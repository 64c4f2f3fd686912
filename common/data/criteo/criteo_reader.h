// Reading and writing Criteo's click-log text format (criteo_record.h): one
// example per line, 40 tab-separated fields
//
//   label  I1 ... I13  C1 ... C26
//
// the label "0" or "1", I1-I13 decimal int64 values (negative ones occur),
// C1-C26 hexadecimal ids (8 digits in Criteo's files; up to 16 accepted), a
// missing feature an empty field. The label is never missing: the unlabelled
// test file of the Kaggle challenge (39 fields) is refused.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/data/criteo/criteo_record.h"

namespace pstrain::criteo {

// Parses one line, without its line terminator. INVALID_ARGUMENT naming what
// is wrong: the field count ("40 tab-separated fields expected ..., found
// 39"), or the 1-based field and its name with the offending text, e.g.
// "field 3 (I2): '12a' is not an integer" -- a label other than 0 or 1, an
// integer that is not one (optional '-', then decimal digits; no '+',
// spaces or fractions) or lies outside int64, a categorical that is not
// hexadecimal or has more than 16 digits.
absl::StatusOr<CriteoRecord> ParseCriteoLine(std::string_view line);

// The line of `record` without a terminator, which ParseCriteoLine reads back
// as an equal record: dense values in decimal, categorical ids in lowercase
// hexadecimal with at least 8 digits, missing features as empty fields.
// The label must be 0 or 1 (CHECK).
std::string FormatCriteoLine(const CriteoRecord& record);

struct CriteoReadOptions {
  // Lines at the start passed over unread (not parsed): the range read
  // starts at line skip_lines + 1.
  int64_t skip_lines = 0;
  // At most this many lines are read after those; -1: to the end.
  int64_t max_lines = -1;
  // false: the first malformed line in the range fails the read. true: it
  // is left out and counted (CriteoLines::malformed_lines).
  bool skip_malformed = false;
};

struct CriteoLines {
  // The records of the well-formed lines of the range, in file order.
  std::vector<CriteoRecord> records;
  // Malformed lines left out (skip_malformed only).
  int64_t malformed_lines = 0;
  // The first of them as ReadCriteoLines would have refused it; OK if none.
  absl::Status first_error;
};

// Reads the lines of `in` (named `name` in errors) in the range `options`
// gives. Lines end with "\n" (a final line may lack it); a "\r" before it is
// dropped (CRLF files). A malformed line is INVALID_ARGUMENT
// "<name>:<1-based line>: <ParseCriteoLine's message>" unless skipped; a
// stream that fails to read is DATA_LOSS naming `name`. Negative
// skip_lines, or max_lines below -1, are INVALID_ARGUMENT.
absl::StatusOr<CriteoLines> ReadCriteoLines(std::istream& in, const std::string& name,
                                            const CriteoReadOptions& options = {});

// ReadCriteoLines over the plain-text file at `path` (errors name the path):
// NOT_FOUND when it cannot be opened.
absl::StatusOr<CriteoLines> ReadCriteoFile(const std::string& path, const CriteoReadOptions& options = {});

// The dense input of DLRM's Criteo preprocessing: log(1 + max(x, 0)); a
// missing value gives 0.
float DenseLog1p(std::optional<int64_t> x);

// DenseLog1p of I1-I13.
std::array<float, kNumDense> TransformDense(const CriteoRecord& record);

}  // namespace pstrain::criteo
