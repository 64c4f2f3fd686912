#include "common/data/criteo/criteo_reader.h"

#include <cmath>
#include <fstream>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain::criteo {
namespace {

// The text of a field in an error: quoted, escaped, at most 40 bytes.
std::string Quote(std::string_view text) {
  constexpr size_t kMax = 40;
  const std::string_view shown = text.substr(0, kMax);
  return absl::StrCat("'", absl::CHexEscape(absl::string_view(shown.data(), shown.size())),
                      text.size() > kMax ? "'..." : "'");
}

// "field 3 (I2)": a field's 1-based number and its name in Criteo's terms.
std::string FieldName(int field) {
  if (field == 0) return "field 1 (label)";
  if (field <= kNumDense) return absl::StrCat("field ", field + 1, " (I", field, ")");
  return absl::StrCat("field ", field + 1, " (C", field - kNumDense, ")");
}

absl::Status FieldError(int field, std::string_view text, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(FieldName(field), ": ", Quote(text), " ", what));
}

// Splits on tabs into exactly kNumFields fields; false when the count differs
// (`*count` then holds the count found).
bool SplitFields(std::string_view line, std::array<std::string_view, kNumFields>* fields, size_t* count) {
  *count = 0;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    const std::string_view field = line.substr(start, tab == std::string_view::npos ? tab : tab - start);
    if (*count < fields->size()) (*fields)[*count] = field;
    ++*count;
    if (tab == std::string_view::npos) return *count == fields->size();
    start = tab + 1;
  }
}

absl::StatusOr<int64_t> ParseInteger(int field, std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  if (digits.empty()) return FieldError(field, text, "is not an integer");
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t magnitude = 0;
  bool overflow = false;
  for (char c : digits) {
    if (c < '0' || c > '9') return FieldError(field, text, "is not an integer");
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (magnitude > (limit - digit) / 10) overflow = true;
    if (!overflow) magnitude = magnitude * 10 + digit;
  }
  if (overflow) return FieldError(field, text, "is out of the range of int64");
  if (!negative) return static_cast<int64_t>(magnitude);
  // -2^63 has no positive counterpart: negate in unsigned arithmetic.
  return static_cast<int64_t>(0 - magnitude);
}

absl::StatusOr<uint64_t> ParseHex(int field, std::string_view text) {
  uint64_t id = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return FieldError(field, text, "is not hexadecimal");
    }
    id = (id << 4) | static_cast<uint64_t>(digit);
  }
  if (text.size() > 16) {
    return FieldError(field, text, absl::StrCat("has ", text.size(), " hexadecimal digits, more than 16"));
  }
  return id;
}

absl::Status ParseFeatures(const std::array<std::string_view, kNumFields>& fields, CriteoRecord* record) {
  for (int j = 0; j < kNumDense; ++j) {
    const std::string_view text = fields[1 + j];
    if (text.empty()) continue;
    absl::StatusOr<int64_t> value = ParseInteger(1 + j, text);
    if (!value.ok()) return value.status();
    record->dense[j] = *value;
  }
  for (int f = 0; f < kNumCategorical; ++f) {
    const std::string_view text = fields[1 + kNumDense + f];
    if (text.empty()) continue;
    absl::StatusOr<uint64_t> id = ParseHex(1 + kNumDense + f, text);
    if (!id.ok()) return id.status();
    record->categorical[f] = *id;
  }
  return absl::OkStatus();
}

void AppendHex(uint64_t id, std::string* out) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[id & 0xf];
    id >>= 4;
  } while (id != 0 || n < 8);
  while (n > 0) out->push_back(digits[--n]);
}

absl::Status CheckRange(const CriteoReadOptions& options) {
  if (options.skip_lines < 0 || options.max_lines < -1) {
    return absl::InvalidArgumentError(absl::StrCat("criteo: skip_lines ", options.skip_lines, " and max_lines ",
                                                   options.max_lines, ": want skip_lines >= 0, max_lines >= -1"));
  }
  return absl::OkStatus();
}

// Passes over `lines` lines of `in`; false when the stream ends first.
bool SkipLines(std::istream& in, int64_t lines) {
  for (int64_t i = 0; i < lines; ++i) {
    if (!in.ignore(std::numeric_limits<std::streamsize>::max(), '\n')) return false;
    if (in.eof()) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<CriteoRecord> ParseCriteoLine(std::string_view line) {
  std::array<std::string_view, kNumFields> fields;
  size_t count = 0;
  if (!SplitFields(line, &fields, &count)) {
    return absl::InvalidArgumentError(absl::StrCat(kNumFields, " tab-separated fields expected (label, I1-I", kNumDense,
                                                   ", C1-C", kNumCategorical, "), found ", count));
  }
  CriteoRecord record;
  if (fields[0] == "1") {
    record.label = 1;
  } else if (fields[0] != "0") {
    return FieldError(0, fields[0], "is not 0 or 1");
  }
  if (absl::Status s = ParseFeatures(fields, &record); !s.ok()) return s;
  return record;
}

std::string FormatCriteoLine(const CriteoRecord& record) {
  CHECK(record.label == 0 || record.label == 1) << "criteo: label " << record.label << " is not 0 or 1";
  std::string line = record.label == 1 ? "1" : "0";
  for (const std::optional<int64_t>& x : record.dense) {
    line.push_back('\t');
    if (x) absl::StrAppend(&line, *x);
  }
  for (const std::optional<uint64_t>& id : record.categorical) {
    line.push_back('\t');
    if (id) AppendHex(*id, &line);
  }
  return line;
}

absl::StatusOr<CriteoLines> ReadCriteoLines(std::istream& in, const std::string& name,
                                            const CriteoReadOptions& options) {
  if (absl::Status s = CheckRange(options); !s.ok()) return s;
  CriteoLines out;
  int64_t number = options.skip_lines;  // 1-based number of the line last read
  if (!SkipLines(in, options.skip_lines)) return out;
  std::string line;
  for (int64_t read = 0; options.max_lines < 0 || read < options.max_lines; ++read) {
    if (!std::getline(in, line)) break;
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    absl::StatusOr<CriteoRecord> record = ParseCriteoLine(line);
    if (record.ok()) {
      out.records.push_back(*record);
      continue;
    }
    absl::Status error = absl::InvalidArgumentError(absl::StrCat(name, ":", number, ": ", record.status().message()));
    if (!options.skip_malformed) return error;
    if (out.malformed_lines++ == 0) out.first_error = std::move(error);
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(name, ": read error after line ", number));
  return out;
}

absl::StatusOr<CriteoLines> ReadCriteoFile(const std::string& path, const CriteoReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be opened"));
  return ReadCriteoLines(in, path, options);
}

float DenseLog1p(std::optional<int64_t> x) {
  if (!x || *x <= 0) return 0.0f;
  return static_cast<float>(std::log1p(static_cast<double>(*x)));
}

std::array<float, kNumDense> TransformDense(const CriteoRecord& record) {
  std::array<float, kNumDense> out;
  for (int j = 0; j < kNumDense; ++j) out[j] = DenseLog1p(record.dense[j]);
  return out;
}

}  // namespace pstrain::criteo
