// The TFRecord layer (common/data/records/): framing, header-only indexing,
// positioned reads with both CRCs checked, the buffered writer, MatchFiles.
#include "common/data/records/record_file.h"

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/records/record_format.h"
#include "common/data/records/record_writer.h"
#include "common/durable_file.h"
#include "common/summary/record_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::data {
namespace {

using test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Payload(int i) { return std::string(static_cast<size_t>(i * 37 % 300), static_cast<char>('a' + i % 26)); }

// Writes records Payload(first) .. Payload(first + n - 1) to `path`.
void WriteRecords(const std::string& path, int first, int n, size_t buffer_bytes = 1 << 20) {
  absl::StatusOr<RecordFileWriter> writer = RecordFileWriter::CreateNew(path, buffer_bytes);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (int i = first; i < first + n; ++i) ASSERT_TRUE(writer->Write(Payload(i)).ok());
  EXPECT_EQ(writer->records_written(), n);
  ASSERT_TRUE(writer->Close().ok());
}

std::string ReadAll(const std::string& path) {
  std::string bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  char buf[4096];
  for (size_t n; f != nullptr && (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
  if (f != nullptr) std::fclose(f);
  return bytes;
}

TEST(RecordFormatTest, Crc32cKnownAnswer) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  const uint32_t crc = 0xE3069283u;
  EXPECT_EQ(MaskedCrc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(RecordFormatTest, FramingMatchesTheTensorBoardWriter) {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<tb::RecordWriter>> tb = tb::RecordWriter::CreateNew(dir / "tb");
  ASSERT_TRUE(tb.ok()) << tb.status();
  std::string ours;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*tb)->Write(Payload(i)).ok());
    AppendRecord(Payload(i), &ours);
  }
  ASSERT_TRUE((*tb)->Close().ok());
  EXPECT_EQ(ReadAll(dir / "tb"), ours);
}

TEST(RecordFormatTest, IndexRecordsInMemory) {
  std::string bytes;
  for (int i = 0; i < 3; ++i) AppendRecord(Payload(i), &bytes);
  absl::StatusOr<std::vector<RecordLocation>> records = IndexRecords(bytes, "mem");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  uint64_t offset = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ((*records)[i].offset, offset);
    EXPECT_EQ((*records)[i].length, Payload(i).size());
    std::string data;
    ASSERT_TRUE(DecodeRecordAt(bytes, (*records)[i], "mem", &data).ok());
    EXPECT_EQ(data, Payload(i));
    offset += 16 + Payload(i).size();
  }
  EXPECT_TRUE(IndexRecords("", "mem")->empty());
}

TEST(RecordFileTest, WritesAndReadsBackByIndexAcrossFiles) {
  TempDir dir;
  WriteRecords(dir / "a", 0, 50, /*buffer_bytes=*/100);  // flushes often
  WriteRecords(dir / "b", 50, 0);                        // empty file
  WriteRecords(dir / "c", 50, 30);
  absl::StatusOr<RecordSet> set = RecordSet::Index({dir / "a", dir / "b", dir / "c"}, false);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(set->size(), 80);
  EXPECT_EQ(set->files().size(), 3u);
  EXPECT_EQ(set->at(49).file, 0);
  EXPECT_EQ(set->at(50).file, 2);
  EXPECT_EQ(set->at(50).offset, 0u);
  EXPECT_EQ(set->file(2), dir / "c");
  RecordSet moved = std::move(*set);  // fds travel with the set
  std::string data;
  for (int i = 79; i >= 0; --i) {
    ASSERT_TRUE(moved.Read(i, &data).ok()) << i;
    EXPECT_EQ(data, Payload(i)) << i;
  }
  EXPECT_TRUE(absl::IsOutOfRange(moved.Read(80, &data)));
  EXPECT_TRUE(absl::IsOutOfRange(moved.Read(-1, &data)));
  EXPECT_EQ(moved.skipped_files_tail(), 0);
}

TEST(RecordFileTest, ConcurrentReads) {
  TempDir dir;
  WriteRecords(dir / "a", 0, 200);
  absl::StatusOr<RecordSet> set = RecordSet::Index({dir / "a"}, false);
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string data;
      for (int i = t; i < 200; i += 3) bad[t] += !set->Read(i, &data).ok() || data != Payload(i);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(bad, ElementsAre(0, 0, 0, 0));
}

TEST(RecordFileTest, WriterRefusesAnExistingFile) {
  TempDir dir;
  WriteRecords(dir / "a", 0, 1);
  EXPECT_TRUE(absl::IsAlreadyExists(RecordFileWriter::CreateNew(dir / "a").status()));
}

TEST(RecordFileTest, MissingFileIsAnErrorNamingIt) {
  TempDir dir;
  absl::StatusOr<RecordSet> set = RecordSet::Index({dir / "nope"}, true);
  EXPECT_TRUE(absl::IsNotFound(set.status())) << set.status();
  EXPECT_THAT(set.status().message(), HasSubstr(dir / "nope"));
}

// A file of records 0..4 followed by records 5..9, with `mutate` applied to
// its bytes; the offset of record 5 (where the damage goes).
uint64_t WriteDamaged(const std::string& path, const std::function<void(std::string*, uint64_t)>& mutate) {
  std::string bytes;
  for (int i = 0; i < 5; ++i) AppendRecord(Payload(i), &bytes);
  const uint64_t offset = bytes.size();
  for (int i = 5; i < 10; ++i) AppendRecord(Payload(i), &bytes);
  mutate(&bytes, offset);
  test::WriteFile(path, bytes);
  return offset;
}

void ExpectRefused(const std::string& path, uint64_t offset, const std::string& what) {
  absl::StatusOr<RecordSet> set = RecordSet::Index({path}, false);
  ASSERT_TRUE(absl::IsDataLoss(set.status())) << set.status();
  EXPECT_THAT(std::string(set.status().message()), StartsWith(absl::StrCat(path, ": ", what, " at offset ", offset)));
  absl::StatusOr<RecordSet> skipped = RecordSet::Index({path, path}, true);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->size(), 10);  // records 0..4 of each copy
  EXPECT_EQ(skipped->skipped_files_tail(), 2);
  std::string data;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(skipped->Read(i, &data).ok());
    EXPECT_EQ(data, Payload(i % 5));
  }
}

TEST(RecordFileTest, TruncatedFile) {
  TempDir dir;
  const uint64_t offset = WriteDamaged(dir / "t", [](std::string* b, uint64_t at) { b->resize(at + 20); });
  ExpectRefused(dir / "t", offset, "truncated record");
  // Inside the header, too.
  const uint64_t in_header = WriteDamaged(dir / "h", [](std::string* b, uint64_t at) { b->resize(at + 5); });
  ExpectRefused(dir / "h", in_header, "truncated record");
}

TEST(RecordFileTest, CorruptHeader) {
  TempDir dir;
  const uint64_t offset = WriteDamaged(dir / "c", [](std::string* b, uint64_t at) { (*b)[at + 2] ^= 0x10; });
  ExpectRefused(dir / "c", offset, "corrupt record header");
}

TEST(RecordFileTest, HugeLengthWithAValidCrcIsCorrupt) {
  std::string bytes;
  AppendRecord("x", &bytes);
  std::string header(8, '\0');
  header[4] = 1;  // 2^32 bytes
  std::string crc(4, '\0');
  const uint32_t masked = MaskedCrc32c(header);
  for (int i = 0; i < 4; ++i) crc[i] = static_cast<char>(masked >> (8 * i));
  bytes += header + crc + std::string(100, 'z');
  absl::StatusOr<std::vector<RecordLocation>> records = IndexRecords(bytes, "mem");
  ASSERT_TRUE(absl::IsDataLoss(records.status())) << records.status();
  EXPECT_THAT(records.status().message(), HasSubstr("mem: corrupt record header at offset 17"));
}

TEST(RecordFileTest, CorruptDataIsFoundByRead) {
  TempDir dir;
  const std::string path = dir / "d";
  const uint64_t offset = WriteDamaged(path, [](std::string* b, uint64_t at) { (*b)[at + 12] ^= 0x01; });
  absl::StatusOr<RecordSet> set = RecordSet::Index({path}, false);
  ASSERT_TRUE(set.ok()) << set.status();  // indexing reads headers only
  std::string data;
  EXPECT_TRUE(set->Read(4, &data).ok());
  absl::Status read = set->Read(5, &data);
  EXPECT_TRUE(absl::IsDataLoss(read)) << read;
  EXPECT_THAT(read.message(), HasSubstr(absl::StrCat(path, ": bad data CRC in record at offset ", offset)));
  EXPECT_TRUE(set->Read(6, &data).ok());
}

TEST(RecordFileTest, FileShortenedAfterIndexing) {
  TempDir dir;
  const std::string path = dir / "s";
  WriteRecords(path, 0, 3);
  absl::StatusOr<RecordSet> set = RecordSet::Index({path}, false);
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(set->at(2).offset + 3)), 0);
  std::string data;
  absl::Status read = set->Read(2, &data);
  EXPECT_TRUE(absl::IsDataLoss(read)) << read;
  EXPECT_THAT(read.message(), HasSubstr(absl::StrCat("truncated record at offset ", set->at(2).offset)));
}

TEST(MatchFilesTest, SortedAndNotFound) {
  TempDir dir;
  for (const char* name : {"train-00002", "train-00000", "train-00001", "validation-00000"}) {
    test::WriteFile(dir / name, "");
  }
  absl::StatusOr<std::vector<std::string>> files = MatchFiles(dir / "train-*");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre(dir / "train-00000", dir / "train-00001", dir / "train-00002"));
  absl::StatusOr<std::vector<std::string>> none = MatchFiles(dir / "test-*");
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr(dir / "test-*"));
}

}  // namespace
}  // namespace pstrain::data
