#include "common/data/idx_reader.h"

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string FashionMnistDir() {
  const char* env = std::getenv("PSTRAIN_FASHION_MNIST_DIR");
  return env != nullptr ? env : "/usr/share/datasets/fashion-mnist";
}

// ---- Real data ----

void CheckRealSplit(std::string_view split, int64_t n, int32_t first_label, double mean_pixel) {
  const std::string dir = FashionMnistDir();
  if (!std::filesystem::exists(std::filesystem::path(dir) / "t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed in " << dir << " (apt install dataset-fashion-mnist)";
  }
  absl::StatusOr<Dataset> data = LoadFashionMnist(dir, split);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, n);
  EXPECT_EQ(data->example_shape, (Shape{1, 28, 28}));
  EXPECT_EQ(data->num_classes, 10);
  ASSERT_EQ(data->images.size(), static_cast<size_t>(n * 784));
  ASSERT_EQ(data->labels.size(), static_cast<size_t>(n));
  EXPECT_TRUE(ValidateDataset(*data).ok());

  std::vector<int64_t> histogram(10, 0);
  for (int32_t y : data->labels) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 10);
    ++histogram[y];
  }
  // Fashion-MNIST is exactly balanced.
  for (int c = 0; c < 10; ++c) EXPECT_EQ(histogram[c], n / 10) << "class " << c;
  EXPECT_EQ(data->labels[0], first_label);

  float lo = 1, hi = 0;
  double sum = 0;
  for (float x : data->images) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
  EXPECT_NEAR(sum / data->images.size(), mean_pixel, 1e-4);
}

TEST(FashionMnistTest, LoadsTrainSplit) { CheckRealSplit("train", 60000, 9, 0.28604); }
TEST(FashionMnistTest, LoadsTestSplit) { CheckRealSplit("test", 10000, 9, 0.28685); }

TEST(FashionMnistTest, UnknownSplitIsInvalidArgument) {
  absl::StatusOr<Dataset> data = LoadFashionMnist(FashionMnistDir(), "validation");
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(data.status().message(), HasSubstr("validation"));
}

// ---- Synthetic files ----

void Put32(std::string* s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string ImagesIdx(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols, size_t pixel_bytes) {
  std::string s;
  Put32(&s, magic);
  Put32(&s, n);
  Put32(&s, rows);
  Put32(&s, cols);
  for (size_t i = 0; i < pixel_bytes; ++i) s.push_back(static_cast<char>(i % 256));
  return s;
}

std::string LabelsIdx(uint32_t magic, uint32_t n, size_t label_bytes) {
  std::string s;
  Put32(&s, magic);
  Put32(&s, n);
  for (size_t i = 0; i < label_bytes; ++i) s.push_back(static_cast<char>(i % 10));
  return s;
}

std::string Gzip(const std::string& raw) {
  uLongf cap = compressBound(raw.size()) + 64;
  std::string out(cap, '\0');
  z_stream zs{};
  // windowBits 15 + 16: gzip wrapper.
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = raw.size();
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = out.size();
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), bytes.size());
  ASSERT_TRUE(f.good()) << path;
}

// A fresh directory holding a valid 5-example "train" split that tests then break.
class IdxFilesTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kN = 5;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "/idx_", info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    images_ = absl::StrCat(dir_, "/train-images-idx3-ubyte.gz");
    labels_ = absl::StrCat(dir_, "/train-labels-idx1-ubyte.gz");
    WriteFile(images_, Gzip(ImagesIdx(2051, kN, 28, 28, kN * 784)));
    WriteFile(labels_, Gzip(LabelsIdx(2049, kN, kN)));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::Status Load() { return LoadFashionMnist(dir_, "train").status(); }

  std::string dir_, images_, labels_;
};

TEST_F(IdxFilesTest, ValidFilesLoadWithScaledPixels) {
  absl::StatusOr<Dataset> data = LoadFashionMnist(dir_, "train");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, kN);
  EXPECT_EQ(data->labels, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(data->images[0], 0.0f);
  EXPECT_FLOAT_EQ(data->images[255], 1.0f);
  EXPECT_FLOAT_EQ(data->images[51], 51.0f / 255.0f);
}

TEST_F(IdxFilesTest, UncompressedFilesAreAcceptedWhenGzIsAbsent) {
  std::filesystem::remove(images_);
  std::filesystem::remove(labels_);
  WriteFile(dir_ + "/train-images-idx3-ubyte", ImagesIdx(2051, kN, 28, 28, kN * 784));
  WriteFile(dir_ + "/train-labels-idx1-ubyte", LabelsIdx(2049, kN, kN));
  absl::StatusOr<Dataset> data = LoadFashionMnist(dir_, "train");
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_examples, kN);
}

TEST_F(IdxFilesTest, MissingFileIsNotFoundAndNamed) {
  std::filesystem::remove(images_);
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("not found")));
}

TEST_F(IdxFilesTest, MissingDirectoryIsNotFound) {
  absl::StatusOr<Dataset> data = LoadFashionMnist(dir_ + "/nope", "test");
  EXPECT_EQ(data.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(data.status().message(), HasSubstr("t10k-labels-idx1-ubyte.gz"));
}

TEST_F(IdxFilesTest, BadImagesMagic) {
  WriteFile(images_, Gzip(ImagesIdx(2049, kN, 28, 28, kN * 784)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("bad magic"), HasSubstr("2051")));
}

TEST_F(IdxFilesTest, BadLabelsMagic) {
  WriteFile(labels_, Gzip(LabelsIdx(0x12345678, kN, kN)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("bad magic"), HasSubstr("2049")));
}

TEST_F(IdxFilesTest, GarbageThatIsNotGzipFailsOnMagic) {
  WriteFile(images_, "this is not an IDX file at all");
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("bad magic")));
}

TEST_F(IdxFilesTest, WrongImageSize) {
  WriteFile(images_, Gzip(ImagesIdx(2051, kN, 32, 32, kN * 1024)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("32x32"), HasSubstr("28x28")));
}

TEST_F(IdxFilesTest, CountMismatchNamesBothFiles) {
  WriteFile(labels_, Gzip(LabelsIdx(2049, kN + 1, kN + 1)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("count mismatch"), HasSubstr(images_), HasSubstr(labels_)));
}

TEST_F(IdxFilesTest, HeaderClaimsMoreImagesThanPresent) {
  WriteFile(images_, Gzip(ImagesIdx(2051, kN, 28, 28, kN * 784 - 100)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("truncated")));
}

TEST_F(IdxFilesTest, HugeCountInHeaderFailsWithoutAllocatingIt) {
  WriteFile(labels_, Gzip(LabelsIdx(2049, 0xffffffffu, kN)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("truncated")));
}

TEST_F(IdxFilesTest, TruncatedHeader) {
  WriteFile(labels_, Gzip(std::string("\0\0\x08", 3)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("truncated"), HasSubstr("header")));
}

TEST_F(IdxFilesTest, TruncatedGzipStream) {
  const std::string gz = Gzip(ImagesIdx(2051, kN, 28, 28, kN * 784));
  WriteFile(images_, gz.substr(0, gz.size() / 2));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("truncated")));
}

TEST_F(IdxFilesTest, GzipStreamMissingOnlyItsTrailer) {
  // All data present but the CRC/length trailer cut off: still a truncated file.
  const std::string gz = Gzip(LabelsIdx(2049, kN, kN));
  WriteFile(labels_, gz.substr(0, gz.size() - 8));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("truncated")));
}

TEST_F(IdxFilesTest, CorruptCrcIsDetected) {
  std::string gz = Gzip(LabelsIdx(2049, kN, kN));
  gz[gz.size() - 8] ^= 0x5a;  // First byte of the CRC32 trailer.
  WriteFile(labels_, gz);
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("corrupt")));
}

TEST_F(IdxFilesTest, CorruptDeflateDataIsDetected) {
  std::string gz = Gzip(ImagesIdx(2051, kN, 28, 28, kN * 784));
  // Invalid block type 3 right after the 10-byte gzip header.
  gz[10] = static_cast<char>(0x07);
  WriteFile(images_, gz);
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(images_), HasSubstr("corrupt")));
}

TEST_F(IdxFilesTest, TrailingData) {
  WriteFile(labels_, Gzip(LabelsIdx(2049, kN, kN + 3)));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("trailing")));
}

TEST_F(IdxFilesTest, LabelOutOfRange) {
  std::string raw = LabelsIdx(2049, kN, kN);
  raw.back() = 10;
  WriteFile(labels_, Gzip(raw));
  absl::Status s = Load();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), AllOf(HasSubstr(labels_), HasSubstr("label 10")));
}

}  // namespace
}  // namespace pstrain
