// Durable files (common/durable_file.h): whole or absent, with a size and
// CRC32C that tell a complete file from a damaged one.
#include "common/durable_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / "durable_file_test";
  fs::create_directories(dir);
  fs::remove_all(dir / name);
  return (dir / name).string();
}

TEST(Crc32cTest, MatchesThePublishedCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(DurableFileTest, WriterDigestEqualsTheWholeFilesAndPiecesMakeTheSameFile) {
  const std::string path = TempPath("pieces");
  absl::StatusOr<DurableFileWriter> writer = DurableFileWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->Append("12345", 5).ok());
  ASSERT_TRUE(writer->Append("", 0).ok());
  ASSERT_TRUE(writer->Append("6789", 4).ok());
  EXPECT_FALSE(fs::exists(path)) << "visible before Commit";
  absl::StatusOr<FileDigest> digest = writer->Commit();
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_EQ(digest->bytes, 9u);
  EXPECT_EQ(digest->crc32c, 0xE3069283u);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  absl::StatusOr<std::string> back = ReadWholeFile(path, &*digest);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "123456789");
}

TEST(DurableFileTest, AnUncommittedWriterLeavesNothing) {
  const std::string path = TempPath("abandoned");
  {
    absl::StatusOr<DurableFileWriter> writer = DurableFileWriter::Create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->Append("partial", 7).ok());
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(DurableFileTest, TruncatedOrCorruptedFilesAreDataLossNamingTheFile) {
  const std::string path = TempPath("damaged");
  absl::StatusOr<FileDigest> digest = WriteFileDurably(path, std::string(1000, 'x'));
  ASSERT_TRUE(digest.ok());
  fs::resize_file(path, 999);
  absl::StatusOr<std::string> truncated = ReadWholeFile(path, &*digest);
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(), HasSubstr(path));
  EXPECT_THAT(truncated.status().message(), HasSubstr("truncated"));

  ASSERT_TRUE(WriteFileDurably(path, std::string(999, 'x') + "y").ok());
  absl::StatusOr<std::string> corrupted = ReadWholeFile(path, &*digest);
  EXPECT_EQ(corrupted.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(corrupted.status().message(), HasSubstr("corrupted"));

  EXPECT_EQ(ReadWholeFile(TempPath("missing")).status().code(), absl::StatusCode::kNotFound);
}

TEST(DurableFileTest, UnwritableDirectoriesAreRefusedNamingThem) {
  const std::string file = TempPath("a_file");
  std::ofstream(file) << "x";
  absl::Status under_file = EnsureWritableDirectory(file + "/sub", "checkpoint.dir");
  EXPECT_EQ(under_file.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(under_file.message(), HasSubstr("checkpoint.dir " + file + "/sub"));
  EXPECT_TRUE(EnsureWritableDirectory(TempPath("new_dir") + "/a/b", "checkpoint.dir").ok());
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  const std::string read_only = TempPath("read_only");
  fs::create_directories(read_only);
  ::chmod(read_only.c_str(), 0555);
  EXPECT_EQ(EnsureWritableDirectory(read_only, "checkpoint.dir").code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace pstrain
