// Criteo's click-log lines (common/data/criteo/criteo_reader.h): lines built
// here field by field with known values, every kind of malformed field
// refused naming it, files with bad lines refused naming the file and line
// (or skipped and counted), and records written and read back.
#include "common/data/criteo/criteo_reader.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::criteo {
namespace {

using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The 40 fields of a line with every feature present: label 1, I_j = 10 * j,
// C_f = 8 hex digits "000000" then f as two hex digits.
std::vector<std::string> WholeFields() {
  std::vector<std::string> fields = {"1"};
  for (int j = 1; j <= kNumDense; ++j) fields.push_back(std::to_string(10 * j));
  const char* hex = "0123456789abcdef";
  for (int f = 1; f <= kNumCategorical; ++f) fields.push_back(std::string("000000") + hex[f / 16] + hex[f % 16]);
  return fields;
}

std::string Join(const std::vector<std::string>& fields) { return absl::StrJoin(fields, "\t"); }

TEST(CriteoReaderTest, ParsesEveryFieldOfAWholeLine) {
  absl::StatusOr<CriteoRecord> r = ParseCriteoLine(Join(WholeFields()));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->label, 1.0f);
  for (int j = 0; j < kNumDense; ++j) EXPECT_EQ(r->dense[j], 10 * (j + 1)) << "I" << j + 1;
  for (int f = 0; f < kNumCategorical; ++f) EXPECT_EQ(r->categorical[f], uint64_t(f + 1)) << "C" << f + 1;
}

TEST(CriteoReaderTest, EmptyFieldsAreMissing) {
  std::vector<std::string> fields = WholeFields();
  fields[0] = "0";
  fields[2] = "";           // I2
  fields[3] = "-3";         // I3: negative values occur in Criteo's I2
  fields[13] = "";          // I13
  fields[14] = "";          // C1
  fields[15] = "ABCDEF01";  // C2: upper case is hexadecimal too
  fields[39] = "";          // C26
  absl::StatusOr<CriteoRecord> r = ParseCriteoLine(Join(fields));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->label, 0.0f);
  EXPECT_EQ(r->dense[0], 10);
  EXPECT_FALSE(r->dense[1].has_value());
  EXPECT_EQ(r->dense[2], -3);
  EXPECT_FALSE(r->dense[12].has_value());
  EXPECT_FALSE(r->categorical[0].has_value());
  EXPECT_EQ(r->categorical[1], 0xabcdef01u);
  EXPECT_EQ(r->categorical[2], 3u);
  EXPECT_FALSE(r->categorical[25].has_value());
  int missing = 0;
  for (const auto& x : r->dense) missing += x ? 0 : 1;
  for (const auto& c : r->categorical) missing += c ? 0 : 1;
  EXPECT_EQ(missing, 4);
}

TEST(CriteoReaderTest, AcceptsTheExtremesOfEachType) {
  std::vector<std::string> fields = WholeFields();
  fields[1] = "9223372036854775807";
  fields[2] = "-9223372036854775808";
  fields[3] = "-0";
  fields[14] = "ffffffffffffffff";
  fields[15] = "0";
  absl::StatusOr<CriteoRecord> r = ParseCriteoLine(Join(fields));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->dense[0], INT64_MAX);
  EXPECT_EQ(r->dense[1], INT64_MIN);
  EXPECT_EQ(r->dense[2], 0);
  EXPECT_EQ(r->categorical[0], UINT64_MAX);
  EXPECT_EQ(r->categorical[1], 0u);
}

struct BadField {
  int field;  // 0-based index into the fields
  std::string text;
  std::string message;  // expected in the error, after the field's name
};

TEST(CriteoReaderTest, EveryMalformedFieldIsRefusedByName) {
  const std::vector<BadField> cases = {
      {0, "2", "field 1 (label): '2' is not 0 or 1"},
      {0, "", "field 1 (label): '' is not 0 or 1"},
      {0, "0.0", "field 1 (label): '0.0' is not 0 or 1"},
      {1, "12a", "field 2 (I1): '12a' is not an integer"},
      {2, "1.5", "field 3 (I2): '1.5' is not an integer"},
      {3, "+4", "field 4 (I3): '+4' is not an integer"},
      {4, " 4", "field 5 (I4): ' 4' is not an integer"},
      {5, "-", "field 6 (I5): '-' is not an integer"},
      {13, "9223372036854775808", "field 14 (I13): '9223372036854775808' is out of the range of int64"},
      {13, "-9223372036854775809", "field 14 (I13): '-9223372036854775809' is out of the range of int64"},
      {13, "99999999999999999999999", "is out of the range of int64"},
      {14, "68fd1e6g", "field 15 (C1): '68fd1e6g' is not hexadecimal"},
      {20, "0x12", "field 21 (C7): '0x12' is not hexadecimal"},
      {39, "ffffffffffffffff0", "field 40 (C26): 'ffffffffffffffff0' has 17 hexadecimal digits, more than 16"},
      {39, "a\x01", "field 40 (C26): 'a\\x01' is not hexadecimal"},
  };
  for (const BadField& c : cases) {
    std::vector<std::string> fields = WholeFields();
    fields[c.field] = c.text;
    absl::StatusOr<CriteoRecord> r = ParseCriteoLine(Join(fields));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
  }
}

TEST(CriteoReaderTest, WrongFieldCountsAreRefused) {
  std::vector<std::string> fields = WholeFields();
  fields.pop_back();
  absl::StatusOr<CriteoRecord> short_line = ParseCriteoLine(Join(fields));
  EXPECT_EQ(short_line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_line.status().message()), HasSubstr("40 tab-separated fields expected"));
  EXPECT_THAT(std::string(short_line.status().message()), HasSubstr("found 39"));
  fields.push_back("1");
  fields.push_back("2");
  EXPECT_THAT(std::string(ParseCriteoLine(Join(fields)).status().message()), HasSubstr("found 41"));
  EXPECT_THAT(std::string(ParseCriteoLine("").status().message()), HasSubstr("found 1"));
  // Spaces are not separators.
  std::string spaced = Join(WholeFields());
  std::replace(spaced.begin(), spaced.end(), '\t', ' ');
  EXPECT_THAT(std::string(ParseCriteoLine(spaced).status().message()), HasSubstr("found 1"));
}

TEST(CriteoReaderTest, LongBadTextIsShortenedInTheMessage) {
  std::vector<std::string> fields = WholeFields();
  fields[1] = std::string(1000, 'x');
  absl::StatusOr<CriteoRecord> r = ParseCriteoLine(Join(fields));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'" + std::string(40, 'x') + "'..."));
  EXPECT_LT(r.status().message().size(), 120u);
}

TEST(CriteoReaderTest, FormatWritesTheFileLayout) {
  CriteoRecord r;
  r.label = 1;
  r.dense[0] = 7;
  r.dense[1] = -2;
  r.categorical[0] = 0x1f;
  r.categorical[25] = 0x123456789aULL;
  const std::string line = FormatCriteoLine(r);
  std::vector<std::string> fields(kNumFields);
  fields[0] = "1";
  fields[1] = "7";
  fields[2] = "-2";
  fields[14] = "0000001f";
  fields[39] = "123456789a";
  EXPECT_EQ(line, Join(fields));
}

// Random records with random missing features, written and parsed back.
TEST(CriteoReaderTest, WriteThenParseRoundTrips) {
  std::mt19937_64 gen(17);
  for (int n = 0; n < 500; ++n) {
    CriteoRecord r;
    r.label = static_cast<float>(gen() & 1);
    for (auto& x : r.dense) {
      if (gen() % 4 != 0) x = static_cast<int64_t>(gen()) >> (gen() % 64);
    }
    for (auto& c : r.categorical) {
      if (gen() % 4 != 0) c = gen() >> (gen() % 64);
    }
    const std::string line = FormatCriteoLine(r);
    absl::StatusOr<CriteoRecord> back = ParseCriteoLine(line);
    ASSERT_TRUE(back.ok()) << back.status() << " for " << line;
    EXPECT_EQ(*back, r) << line;
  }
}

// Lines 1, 2, 4, 5, 7 good (line 2 with missing values), 3 and 6 malformed.
struct MixedFile {
  std::string text;
  std::vector<CriteoRecord> good;  // the good lines' records, in order
};

MixedFile MakeMixedFile() {
  MixedFile file;
  std::vector<std::string> lines;
  for (int i = 0; i < 7; ++i) {
    std::vector<std::string> fields = WholeFields();
    fields[1] = std::to_string(i + 1);  // I1 = the line number
    if (i == 1) fields[5] = fields[30] = "";
    if (i == 2) fields[22] = "nothex";
    if (i == 5) fields.pop_back();
    lines.push_back(Join(fields));
    if (i != 2 && i != 5) file.good.push_back(*ParseCriteoLine(lines.back()));
  }
  file.text = absl::StrJoin(lines, "\n") + "\n";
  return file;
}

TEST(CriteoReaderTest, AMalformedLineFailsTheFileNamingIt) {
  TempDir dir;
  const MixedFile mixed = MakeMixedFile();
  WriteFile(dir / "day_0", mixed.text);
  absl::StatusOr<CriteoLines> read = ReadCriteoFile(dir / "day_0");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()),
              StartsWith(dir / "day_0:3: field 23 (C9): 'nothex' is not hexadecimal"));

  EXPECT_EQ(ReadCriteoFile(dir / "absent").status().code(), absl::StatusCode::kNotFound);
}

TEST(CriteoReaderTest, SkippingReturnsTheGoodLinesAndCountsTheBad) {
  TempDir dir;
  const MixedFile mixed = MakeMixedFile();
  WriteFile(dir / "day_0", mixed.text);
  CriteoReadOptions options;
  options.skip_malformed = true;
  absl::StatusOr<CriteoLines> read = ReadCriteoFile(dir / "day_0", options);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->records.size(), 5u);
  const std::vector<int64_t> line_numbers = {1, 2, 4, 5, 7};
  for (size_t i = 0; i < line_numbers.size(); ++i) EXPECT_EQ(read->records[i].dense[0], line_numbers[i]);
  EXPECT_EQ(read->records, mixed.good);
  EXPECT_FALSE(read->records[1].dense[4].has_value());
  EXPECT_FALSE(read->records[1].categorical[16].has_value());
  EXPECT_EQ(read->malformed_lines, 2);
  EXPECT_THAT(std::string(read->first_error.message()), StartsWith(dir / "day_0:3: field 23 (C9)"));
}

TEST(CriteoReaderTest, ReadsARangeOfLines) {
  TempDir dir;
  const MixedFile mixed = MakeMixedFile();
  WriteFile(dir / "day_0", mixed.text);
  CriteoReadOptions options;
  options.skip_lines = 3;
  options.max_lines = 2;  // lines 4 and 5: both good, so strict reading succeeds
  absl::StatusOr<CriteoLines> read = ReadCriteoFile(dir / "day_0", options);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->records.size(), 2u);
  EXPECT_EQ(read->records[0].dense[0], 4);
  EXPECT_EQ(read->records[1].dense[0], 5);

  options.max_lines = 3;  // line 6 is bad: named by its number in the file
  EXPECT_THAT(std::string(ReadCriteoFile(dir / "day_0", options).status().message()),
              StartsWith(dir / "day_0:6: 40 tab-separated fields expected"));
  options.skip_lines = 6;
  options.max_lines = -1;  // line 7 alone
  read = ReadCriteoFile(dir / "day_0", options);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->records.size(), 1u);
  EXPECT_EQ(read->records[0].dense[0], 7);
  options.skip_lines = 100;  // past the end: nothing
  read = ReadCriteoFile(dir / "day_0", options);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->records.empty());
  options.skip_lines = -1;
  EXPECT_EQ(ReadCriteoFile(dir / "day_0", options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CriteoReaderTest, CrlfAndAMissingFinalNewlineAreRead) {
  TempDir dir;
  std::vector<std::string> fields = WholeFields();
  const std::string first = Join(fields);
  fields[1] = "2";
  WriteFile(dir / "crlf", first + "\r\n" + Join(fields));
  absl::StatusOr<CriteoLines> read = ReadCriteoFile(dir / "crlf");
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->records.size(), 2u);
  EXPECT_EQ(read->records[0].categorical[25], 26u);  // not 26 with a '\r' refused as hexadecimal
  EXPECT_EQ(read->records[1].dense[0], 2);
  // An empty line is a malformed one, not the end of the file.
  WriteFile(dir / "blank", first + "\n\n" + first + "\n");
  EXPECT_THAT(std::string(ReadCriteoFile(dir / "blank").status().message()), HasSubstr(":2: 40 tab-separated"));
}

TEST(CriteoReaderTest, DenseTransformIsLogOnePlusThePositivePart) {
  EXPECT_EQ(DenseLog1p(std::nullopt), 0.0f);
  EXPECT_EQ(DenseLog1p(0), 0.0f);
  EXPECT_EQ(DenseLog1p(-5), 0.0f);
  EXPECT_FLOAT_EQ(DenseLog1p(1), std::log(2.0f));
  EXPECT_FLOAT_EQ(DenseLog1p(999), std::log(1000.0f));
  CriteoRecord r;
  r.dense[0] = 3;
  r.dense[12] = -1;
  const std::array<float, kNumDense> x = TransformDense(r);
  EXPECT_FLOAT_EQ(x[0], std::log(4.0f));
  for (int j = 1; j < kNumDense; ++j) EXPECT_EQ(x[j], 0.0f) << j;
}

}  // namespace
}  // namespace pstrain::criteo
