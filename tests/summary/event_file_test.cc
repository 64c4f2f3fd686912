// TensorBoard event files: TFRecord framing and checksums against independent
// reference values, write-then-read of scalars, and the reader's handling of
// corrupt and truncated files.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/summary/event_reader.h"
#include "common/summary/event_writer.h"
#include "common/summary/record_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/summary.pb.h"

namespace pstrain::tb {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A fresh, empty directory per test.
class EventFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "/summary_", info->name(), "_", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The one event file in `dir`.
  static std::string OnlyEventFile(const std::string& dir) {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().string());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? "" : files[0];
  }

  std::string dir_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Writes `records` with a RecordWriter to a new file at `path`.
void WriteRecords(const std::string& path, const std::vector<std::string>& records) {
  auto writer = RecordWriter::CreateNew(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const std::string& r : records) ASSERT_TRUE((*writer)->Write(r).ok());
  ASSERT_TRUE((*writer)->Close().ok());
}

// Reads every record of `path`; the status of the first failure, if any.
absl::StatusOr<std::vector<std::string>> ReadRecords(const std::string& path) {
  auto reader = RecordReader::Open(path);
  if (!reader.ok()) return reader.status();
  std::vector<std::string> records;
  while (true) {
    auto record = (*reader)->Next();
    if (!record.ok()) return record.status();
    if (!record->has_value()) return records;
    records.push_back(**record);
  }
}

// ---- Checksums ----

// Reference values, independent of our code:
//  - CRC-32C("123456789") = 0xE3069283 is the published check value of CRC-32C.
//  - The 32-byte vectors are those of RFC 3720 (iSCSI), appendix B.4.
//  - The masked value and the framed records below were computed with a
//    bit-at-a-time CRC-32C in Python (reflected polynomial 0x82F63B78):
//      def crc32c(data):
//          crc = 0xFFFFFFFF
//          for b in data:
//              crc ^= b
//              for _ in range(8):
//                  crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
//          return crc ^ 0xFFFFFFFF
//      def mask(c):  # TensorFlow's core/lib/hash/crc32c.h Mask()
//          return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xa282ead8) & 0xFFFFFFFF
//      def record(d):
//          h = struct.pack("<Q", len(d))
//          return h + struct.pack("<I", mask(crc32c(h))) + d + struct.pack("<I", mask(crc32c(d)))
TEST(Crc32cTest, MatchesPublishedVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32cTest, MaskedCrcMatchesTensorFlowMask) { EXPECT_EQ(MaskedCrc32c("123456789"), 0xC78AB0E5u); }

TEST_F(EventFileTest, RecordFramingIsByteExact) {
  const std::string path = dir_ + "/records";
  WriteRecords(path, {"hello", ""});
  EXPECT_EQ(absl::BytesToHexString(ReadBytes(path)),
            "0500000000000000eab2043e68656c6c6fbb1f1c19"  // "hello"
            "000000000000000029039807d8ea82a2");          // ""
}

// ---- Records ----

TEST_F(EventFileTest, RecordsRoundTripAndAppend) {
  const std::string path = dir_ + "/records";
  const std::string binary("\0\x01\xff\n", 4);
  WriteRecords(path, {"alpha", "", binary});
  {
    auto writer = RecordWriter::Append(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Write("omega").ok());
  }
  auto records = ReadRecords(path);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(*records, (std::vector<std::string>{"alpha", "", binary, "omega"}));
}

TEST_F(EventFileTest, CreateNewRefusesAnExistingFile) {
  const std::string path = dir_ + "/records";
  WriteRecords(path, {"alpha"});
  auto writer = RecordWriter::CreateNew(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(writer.status().message(), HasSubstr(path));
}

TEST_F(EventFileTest, FlippedDataByteIsCorruptionAtTheRecordOffset) {
  const std::string path = dir_ + "/records";
  WriteRecords(path, {"alpha", "bravo", "charlie"});
  // "alpha" takes 12 + 5 + 4 bytes, so "bravo" starts at 21, its data at 33.
  std::string bytes = ReadBytes(path);
  bytes[33 + 2] ^= 0x01;
  WriteBytes(path, bytes);

  auto reader = RecordReader::Open(path);
  ASSERT_TRUE(reader.ok());
  auto first = (*reader)->Next();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(**first, "alpha");
  auto second = (*reader)->Next();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(second.status().message(), HasSubstr(path));
  EXPECT_THAT(second.status().message(), HasSubstr("corrupt record at byte offset 21"));
  EXPECT_THAT(second.status().message(), HasSubstr("data checksum"));
}

TEST_F(EventFileTest, FlippedLengthByteIsCorruption) {
  const std::string path = dir_ + "/records";
  WriteRecords(path, {"alpha", "bravo"});
  std::string bytes = ReadBytes(path);
  bytes[21] ^= 0x40;  // The length of "bravo".
  WriteBytes(path, bytes);
  auto records = ReadRecords(path);
  ASSERT_FALSE(records.ok());
  EXPECT_EQ(records.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(records.status().message(), HasSubstr("corrupt record at byte offset 21"));
  EXPECT_THAT(records.status().message(), HasSubstr("length checksum"));
}

TEST_F(EventFileTest, FileCutInsideARecordIsTruncationNotCorruption) {
  const std::string path = dir_ + "/records";
  WriteRecords(path, {"alpha", "bravo"});
  const std::string whole = ReadBytes(path);
  ASSERT_EQ(whole.size(), 42u);
  // Cut inside the second record's header, data and final checksum.
  for (size_t cut : {22u, 30u, 35u, 41u}) {
    SCOPED_TRACE(cut);
    WriteBytes(path, whole.substr(0, cut));
    auto reader = RecordReader::Open(path);
    ASSERT_TRUE(reader.ok());
    auto first = (*reader)->Next();
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(**first, "alpha");
    auto second = (*reader)->Next();
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(second.status().message(), HasSubstr(path));
    EXPECT_THAT(second.status().message(), HasSubstr("truncated record at byte offset 21"));
  }
  // Once the rest arrives (a file still being written), the record reads whole.
  WriteBytes(path, whole.substr(0, 30));
  auto reader = RecordReader::Open(path);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Next().ok());
  EXPECT_EQ((*reader)->Next().status().code(), absl::StatusCode::kOutOfRange);
  WriteBytes(path, whole);
  auto second = (*reader)->Next();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(**second, "bravo");
  auto end = (*reader)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

// ---- Event files ----

TEST_F(EventFileTest, ScalarsReadBackInOrderAfterFileVersion) {
  std::string path;
  {
    auto writer = EventFileWriter::Create(dir_ + "/run", "chief");
    ASSERT_TRUE(writer.ok()) << writer.status();
    path = (*writer)->path();
    ASSERT_TRUE((*writer)->AddScalar("loss", 0, 2.5).ok());
    ASSERT_TRUE((*writer)->AddScalars(10, {{"loss", 1.25}, {"images_per_sec", 1024.0}}).ok());
    ASSERT_TRUE((*writer)->AddScalars(15, {}).ok());
    ASSERT_TRUE((*writer)->AddScalar("loss", 20, -0.5).ok());
    ASSERT_TRUE((*writer)->Flush().ok());
  }  // The destructor closes the file.
  EXPECT_EQ(OnlyEventFile(dir_ + "/run"), path);

  // The first record alone: the version event, with nothing else in it.
  auto records = ReadRecords(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 4u);  // version + three events with values.
  Event first;
  ASSERT_TRUE(first.ParseFromString((*records)[0]));
  EXPECT_EQ(first.what_case(), Event::kFileVersion);
  EXPECT_EQ(first.file_version(), "brain.Event:2");
  EXPECT_GT(first.wall_time(), 1.5e9);

  auto contents = ReadEventFile(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->file_version, "brain.Event:2");
  const std::vector<ScalarPoint>& s = contents->scalars;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].tag, "loss");
  EXPECT_EQ(s[0].step, 0);
  EXPECT_EQ(s[0].value, 2.5);
  EXPECT_EQ(s[1].tag, "loss");
  EXPECT_EQ(s[1].step, 10);
  EXPECT_EQ(s[1].value, 1.25);
  EXPECT_EQ(s[2].tag, "images_per_sec");
  EXPECT_EQ(s[2].step, 10);
  EXPECT_EQ(s[2].value, 1024.0);
  EXPECT_EQ(s[2].wall_time, s[1].wall_time);  // One event for the call.
  EXPECT_EQ(s[3].tag, "loss");
  EXPECT_EQ(s[3].step, 20);
  EXPECT_EQ(s[3].value, -0.5);
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_GE(s[i].wall_time, first.wall_time());
    if (i > 0) {
      EXPECT_GE(s[i].wall_time, s[i - 1].wall_time);
    }
  }
}

TEST_F(EventFileTest, ValuesAreStoredAsFloat) {
  auto writer = EventFileWriter::Create(dir_, "ps0");
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->AddScalar("accuracy", 1, 0.1).ok());
  auto contents = ReadEventFile((*writer)->path());
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->scalars.size(), 1u);
  EXPECT_EQ(contents->scalars[0].value, static_cast<double>(0.1f));
}

TEST_F(EventFileTest, FileNameFollowsTensorBoard) {
  const int64_t before = absl::ToUnixSeconds(absl::Now());
  auto writer = EventFileWriter::Create(dir_, "ps0");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const int64_t after = absl::ToUnixSeconds(absl::Now());
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);

  const std::string name = std::filesystem::path((*writer)->path()).filename().string();
  const std::string tail = absl::StrCat(".", host, ".", ::getpid(), ".ps0");
  EXPECT_THAT(name, StartsWith("events.out.tfevents."));
  ASSERT_THAT(name, ::testing::EndsWith(tail));
  const std::string seconds = name.substr(20, name.size() - 20 - tail.size());
  int64_t t = 0;
  ASSERT_TRUE(absl::SimpleAtoi(seconds, &t)) << name;
  EXPECT_GE(t, before);
  EXPECT_LE(t, after);
  EXPECT_EQ((*writer)->path(), absl::StrCat(dir_, "/", name));
}

TEST_F(EventFileTest, ConcurrentWritersLoseNothing) {
  constexpr int kThreads = 8;
  constexpr int kStepsPerThread = 200;
  auto writer = EventFileWriter::Create(dir_, "chief");
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int step = 0; step < kStepsPerThread; ++step) {
        EXPECT_TRUE((*writer)->AddScalar(absl::StrCat("thread", t), step, t * 1000 + step).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE((*writer)->Flush().ok());

  auto contents = ReadEventFile((*writer)->path());
  ASSERT_TRUE(contents.ok()) << contents.status();
  ASSERT_EQ(contents->scalars.size(), static_cast<size_t>(kThreads * kStepsPerThread));
  // Each thread's points arrive whole and in its own order.
  std::vector<int> next_step(kThreads, 0);
  for (const ScalarPoint& p : contents->scalars) {
    int t = -1;
    ASSERT_TRUE(absl::SimpleAtoi(p.tag.substr(6), &t)) << p.tag;
    ASSERT_GE(t, 0);
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(p.step, next_step[t]++);
    EXPECT_EQ(p.value, t * 1000 + p.step);
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next_step[t], kStepsPerThread);
}

TEST_F(EventFileTest, ReaderNamesTheCorruptEventRecord) {
  auto writer = EventFileWriter::Create(dir_, "chief");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string path = (*writer)->path();
  ASSERT_TRUE((*writer)->AddScalar("loss", 1, 1.0).ok());
  const uint64_t second_record = ReadBytes(path).size();
  ASSERT_TRUE((*writer)->AddScalar("loss", 2, 0.5).ok());
  writer->reset();

  std::string bytes = ReadBytes(path);
  bytes[second_record + 12 + 3] ^= 0x20;  // A data byte of the last event.
  WriteBytes(path, bytes);
  auto contents = ReadEventFile(path);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(contents.status().message(), HasSubstr(path));
  EXPECT_THAT(contents.status().message(), HasSubstr(absl::StrCat("byte offset ", second_record)));

  WriteBytes(path, bytes.substr(0, bytes.size() - 2));
  contents = ReadEventFile(path);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(contents.status().message(), HasSubstr("truncated"));
}

TEST_F(EventFileTest, RecordThatIsNotAnEventIsDataLoss) {
  const std::string path = dir_ + "/events.out.tfevents.bad";
  WriteRecords(path, {"\xff\xff\xff"});  // A valid record holding an invalid message.
  auto contents = ReadEventFile(path);
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(contents.status().message(), HasSubstr("record at byte offset 0 is not an Event"));
}

TEST_F(EventFileTest, DirectoryThatCannotBeCreatedIsNamed) {
  // A directory under a regular file cannot be created, not even by root.
  const std::string file = dir_ + "/plain_file";
  WriteBytes(file, "x");
  const std::string dir = file + "/summaries";
  auto writer = EventFileWriter::Create(dir, "chief");
  ASSERT_FALSE(writer.ok());
  EXPECT_THAT(writer.status().message(), HasSubstr(absl::StrCat("summary directory ", dir)));
}

TEST_F(EventFileTest, DirectoryThatCannotBeWrittenIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes to any directory";
  const std::string dir = dir_ + "/read_only";
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  auto writer = EventFileWriter::Create(dir, "chief");
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(writer.status().message(), HasSubstr(absl::StrCat("cannot write to summary directory ", dir)));
}

TEST_F(EventFileTest, SuffixWithSlashIsRejected) {
  auto writer = EventFileWriter::Create(dir_, "ps/0");
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EventFileTest, MissingFileIsNotFound) {
  auto contents = ReadEventFile(dir_ + "/nope");
  ASSERT_FALSE(contents.ok());
  EXPECT_EQ(contents.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(contents.status().message(), HasSubstr(dir_ + "/nope"));
}

}  // namespace
}  // namespace pstrain::tb
