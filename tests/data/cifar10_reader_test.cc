// CIFAR-10's binary batches (common/data/cifar10_reader.h) over files made
// here with a known answer: record r of a file has label r % 10 and every
// byte of its red, green and blue planes equal to r, r + 1, r + 2; damaged
// files are refused naming the file (and the record's offset).
#include "common/data/cifar10_reader.h"

#include <filesystem>
#include <string>

#include "common/data/data_source.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

std::string Records(int n) {
  std::string bytes;
  for (int r = 0; r < n; ++r) {
    bytes.push_back(static_cast<char>(r % 10));
    for (int plane = 0; plane < 3; ++plane) bytes.append(1024, static_cast<char>(r + plane));
  }
  return bytes;
}

// The six files under dir/cifar-10-batches-bin/, `n` records each.
void WriteBatches(const std::string& dir, int n) {
  std::filesystem::create_directories(dir + "/cifar-10-batches-bin");
  for (const std::string& split : {std::string("train"), std::string("test")}) {
    for (const std::string& file : Cifar10Files(dir, split)) WriteFile(file, Records(n));
  }
}

TEST(Cifar10ReaderTest, LoadsEveryRecordAsPlanesOverTwoFiftyFive) {
  TempDir dir;
  WriteBatches(dir.path(), 12);
  absl::StatusOr<Dataset> train = LoadCifar10(dir.path(), "train");
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->num_examples, 60);  // 5 files x 12
  EXPECT_EQ(train->example_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(train->num_classes, 10);
  EXPECT_TRUE(ValidateDataset(*train).ok());
  for (int64_t i = 0; i < train->num_examples; ++i) {
    const int r = static_cast<int>(i % 12);
    EXPECT_EQ(train->labels[i], r % 10);
    for (int plane = 0; plane < 3; ++plane) {
      EXPECT_FLOAT_EQ(train->images[i * 3072 + plane * 1024 + 517], (r + plane) / 255.0f);
    }
  }
  absl::StatusOr<Dataset> test = LoadCifar10(dir.path(), "test");
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->num_examples, 12);
}

TEST(Cifar10ReaderTest, DamagedOrMissingFilesAreNamed) {
  TempDir dir;
  WriteBatches(dir.path(), 3);
  const std::string third = Cifar10Files(dir.path(), "train")[2];
  WriteFile(third, Records(3).substr(0, 5000));
  absl::StatusOr<Dataset> truncated = LoadCifar10(dir.path(), "train");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(truncated.status().message()), HasSubstr(third));

  std::string bad = Records(3);
  bad[2 * kCifar10RecordBytes] = 17;
  WriteFile(third, bad);
  absl::StatusOr<Dataset> label = LoadCifar10(dir.path(), "train");
  EXPECT_THAT(std::string(label.status().message()),
              HasSubstr(third + ": record at offset 6146 has label 17, outside 0-9"));

  std::filesystem::remove(Cifar10Files(dir.path(), "test")[0]);
  EXPECT_EQ(LoadCifar10(dir.path(), "test").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadCifar10(dir.path(), "validation").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Cifar10ReaderTest, TheSourceLoadsBothSplits) {
  TempDir dir;
  WriteBatches(dir.path(), 2);
  ExperimentConfig c;
  c.mutable_data()->set_source("cifar10");
  c.mutable_data()->set_path(dir.path());
  absl::StatusOr<Datasets> data = LoadDatasets(c, true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 10);
  EXPECT_EQ(data->test.num_examples, 2);
}

}  // namespace
}  // namespace pstrain
