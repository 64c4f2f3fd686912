// data.source tfrecord end to end over files made here with a known answer:
// PNG images of one colour per class, so the decoded batch is exactly that
// colour / 255 (resize, no normalisation). The batcher decodes on a pool,
// the prefetcher hands over the same batches, and every kind of bad record
// is refused naming its file and offset (or skipped and counted).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/config/config_loader.h"
#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "common/data/decode_pool.h"
#include "common/data/image/codec.h"
#include "common/data/prefetcher.h"
#include "common/data/records/image_example.h"
#include "common/data/records/record_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

constexpr int kClasses = 3;
constexpr int kSide = 12;

// The colour of class c.
uint8_t Channel(int c, int channel) { return static_cast<uint8_t>(40 + 60 * c + 20 * channel); }

std::string ClassImage(int c) {
  image::Image img;
  img.width = img.height = kSide;
  img.channels = 3;
  img.pixels.resize(kSide * kSide * 3);
  for (size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = Channel(c, static_cast<int>(i % 3));
  absl::StatusOr<std::string> png = image::EncodePng(img);
  EXPECT_TRUE(png.ok()) << png.status();
  return png.ok() ? *png : std::string();
}

// `n` examples (label i % kClasses) into dir/name; returns the record bytes
// written, in order.
std::vector<std::string> WriteShard(const std::string& dir, const std::string& name, int n, int first = 0) {
  absl::StatusOr<data::RecordFileWriter> writer = data::RecordFileWriter::CreateNew(dir + "/" + name);
  EXPECT_TRUE(writer.ok()) << writer.status();
  std::vector<std::string> records;
  for (int i = first; i < first + n; ++i) {
    data::ImageExample e;
    e.label = i % kClasses;
    e.encoded = ClassImage(i % kClasses);
    e.format = "PNG";
    records.push_back(data::SerializeImageExample(e));
    EXPECT_TRUE(writer->Write(records.back()).ok());
  }
  EXPECT_TRUE(writer->Close().ok());
  return records;
}

class TfRecordSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteShard(dir_.path(), "train-00000-of-00002", 6);
    WriteShard(dir_.path(), "train-00001-of-00002", 6, 6);
    WriteShard(dir_.path(), "validation-00000-of-00001", 5);
    WriteFile(dir_.path() + "/labels.txt", "red\ngreen\nblue\n");
  }

  ExperimentConfig Config() const {
    ExperimentConfig c;
    c.mutable_data()->set_source("tfrecord");
    c.mutable_data()->set_path(dir_.path());
    c.mutable_data()->set_augmentation(DataConfig::resize);
    c.mutable_data()->mutable_normalization()->set_preset(NormalizationConfig::none);
    for (int d : {3, 8, 8}) c.mutable_model()->add_input_shape(d);
    return c;
  }

  // Every example of `images` is its label's colour.
  static void ExpectClassColours(const Tensor& images, const std::vector<int32_t>& labels) {
    const int64_t per = 3 * 8 * 8;
    for (size_t i = 0; i < labels.size(); ++i) {
      for (int64_t k = 0; k < per; ++k) {
        const float want = Channel(labels[i], static_cast<int>(k / 64)) / 255.0f;
        ASSERT_NEAR(images.data()[i * per + k], want, 1e-6) << "example " << i << " element " << k;
      }
    }
  }

  TempDir dir_;
};

TEST_F(TfRecordSourceTest, LoadsBothSplitsWithTheModelShapeAndTheLabelsFileClasses) {
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(data->train.encoded());
  EXPECT_EQ(data->train.num_examples, 12);
  EXPECT_EQ(data->test.num_examples, 5);
  EXPECT_EQ(data->train.example_shape, (Shape{3, 8, 8}));
  EXPECT_EQ(data->train.num_classes, 3);  // labels.txt
  EXPECT_TRUE(ValidateDataset(data->train).ok());
}

TEST_F(TfRecordSourceTest, TheShapeDefaultsToTheFirstImage) {
  ExperimentConfig c = Config();
  c.mutable_model()->clear_input_shape();
  absl::StatusOr<Datasets> data = LoadDatasets(c, false);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.example_shape, (Shape{3, kSide, kSide}));
}

TEST_F(TfRecordSourceTest, BatchesDecodeToTheKnownColoursOnAPool) {
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data->train, 0, 2, 3, /*seed=*/7, true);
  ASSERT_TRUE(batcher.ok());
  DecodePool pool(2);
  Tensor images;
  std::vector<int32_t> labels;
  EXPECT_EQ(batcher->Fill(0, &images, &labels).code(), absl::StatusCode::kFailedPrecondition);  // no pool
  for (int64_t step = 0; step < 4; ++step) {
    ASSERT_TRUE(batcher->Fill(step, &images, &labels, &pool).ok());
    ASSERT_EQ(labels.size(), 3u);
    for (size_t i = 0; i < labels.size(); ++i) {
      EXPECT_EQ(labels[i], batcher->ExampleIndices(step)[i] % kClasses);  // the shards hold 0..11 in order
    }
    ExpectClassColours(images, labels);
  }
}

TEST_F(TfRecordSourceTest, RandomCropsAreTheSameWhateverTheThreadCount) {
  ExperimentConfig c = Config();
  c.mutable_data()->set_augmentation(DataConfig::crop);
  c.mutable_data()->mutable_normalization()->set_preset(NormalizationConfig::imagenet);
  absl::StatusOr<Datasets> data = LoadDatasets(c, false);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data->train, 0, 1, 6, 3, true);
  ASSERT_TRUE(batcher.ok());
  DecodePool one(1), three(3);
  Tensor a, b;
  std::vector<int32_t> la, lb;
  for (int64_t step : {0, 1, 2, 5}) {
    ASSERT_TRUE(batcher->Fill(step, &a, &la, &one).ok());
    ASSERT_TRUE(batcher->Fill(step, &b, &lb, &three).ok());
    EXPECT_EQ(la, lb);
    ASSERT_EQ(a.num_elements(), b.num_elements());
    EXPECT_TRUE(std::equal(a.data(), a.data() + a.num_elements(), b.data())) << "step " << step;
  }
}

TEST_F(TfRecordSourceTest, ThePrefetcherHandsOverWhatFillMakes) {
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data->train, 1, 2, 2, 5, true);
  ASSERT_TRUE(batcher.ok());
  DecodePool pool(2);
  BatchPrefetcher prefetcher(&*batcher, &pool, 2);
  Tensor got, want;
  std::vector<int32_t> got_labels, want_labels;
  // In order, then a jump back (a resume), then on again.
  for (int64_t step : {0, 1, 2, 3, 4, 1, 2, 3, 7}) {
    ASSERT_TRUE(prefetcher.Next(step, &got, &got_labels).ok()) << "step " << step;
    ASSERT_TRUE(batcher->Fill(step, &want, &want_labels, &pool).ok());
    EXPECT_EQ(got_labels, want_labels) << "step " << step;
    EXPECT_TRUE(std::equal(want.data(), want.data() + want.num_elements(), got.data())) << "step " << step;
  }
  EXPECT_GE(prefetcher.wait_time(), absl::ZeroDuration());
}

// Flips one byte at `offset` of `file`.
void FlipByte(const std::string& file, std::streamoff offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  char c = 0;
  f.get(c);
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x55));
}

// Fills every step of one epoch of the whole set with one worker.
absl::Status FillEpoch(const Dataset& data, DecodePool& pool) {
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data, 0, 1, 1, 1, false);
  if (!batcher.ok()) return batcher.status();
  Tensor images;
  std::vector<int32_t> labels;
  for (int64_t step = 0; step < batcher->steps_per_epoch(); ++step) {
    if (absl::Status s = batcher->Fill(step, &images, &labels, &pool); !s.ok()) return s;
  }
  return absl::OkStatus();
}

TEST_F(TfRecordSourceTest, ABadDataCrcIsRefusedNamingFileAndOffsetOrSkippedAndCounted) {
  const std::string file = dir_.path() + "/train-00001-of-00002";
  FlipByte(file, 20);                                             // inside the first record's data
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);  // indexing reads headers only
  ASSERT_TRUE(data.ok()) << data.status();
  DecodePool pool(2);
  const absl::Status s = FillEpoch(data->train, pool);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(file));
  EXPECT_THAT(std::string(s.message()), HasSubstr("offset 0"));

  ExperimentConfig c = Config();
  c.mutable_data()->set_skip_corrupt(true);
  absl::StatusOr<Datasets> skipping = LoadDatasets(c, false);
  ASSERT_TRUE(skipping.ok());
  EXPECT_TRUE(FillEpoch(skipping->train, pool).ok());
  EXPECT_EQ(skipping->train.decoder->skipped(), 1);
}

TEST_F(TfRecordSourceTest, ARecordWhoseImageIsNotAnImageIsRefusedNamingFileAndOffset) {
  const std::string file = dir_.path() + "/train-00000-of-00002";
  std::filesystem::remove(file);
  absl::StatusOr<data::RecordFileWriter> writer = data::RecordFileWriter::CreateNew(file);
  ASSERT_TRUE(writer.ok());
  data::ImageExample good;
  good.encoded = ClassImage(0);
  const std::string first = data::SerializeImageExample(good);
  ASSERT_TRUE(writer->Write(first).ok());
  data::ImageExample bad;
  bad.encoded = "this is no image at all";
  ASSERT_TRUE(writer->Write(data::SerializeImageExample(bad)).ok());
  ASSERT_TRUE(writer->Close().ok());
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_TRUE(data.ok()) << data.status();
  DecodePool pool(1);
  const absl::Status s = FillEpoch(data->train, pool);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(file, ": record at offset ", first.size() + 16)));
}

TEST_F(TfRecordSourceTest, ATruncatedFileIsRefusedAtLoadNamingFileAndOffset) {
  const std::string file = dir_.path() + "/train-00001-of-00002";
  const auto size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, size - 7);
  absl::StatusOr<Datasets> data = LoadDatasets(Config(), false);
  ASSERT_FALSE(data.ok());
  EXPECT_THAT(std::string(data.status().message()), HasSubstr(file));
  EXPECT_THAT(std::string(data.status().message()), HasSubstr("truncated record at offset"));
}

TEST_F(TfRecordSourceTest, ALabelOutsideTheClassesNamesTheRecord) {
  ExperimentConfig c = Config();
  c.mutable_model()->set_num_classes(2);  // labels go to 2
  absl::StatusOr<Datasets> data = LoadDatasets(c, false);
  ASSERT_TRUE(data.ok());
  DecodePool pool(1);
  const absl::Status s = FillEpoch(data->train, pool);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("label 2 minus data.label_offset 0 is outside [0, 2)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("record at offset"));
}

TEST_F(TfRecordSourceTest, TheConfigCheckNamesBadFields) {
  ExperimentConfig valid = Config();
  valid.mutable_cluster()->add_ps_hosts("localhost:2222");
  valid.mutable_cluster()->add_worker_hosts("localhost:2223");
  ASSERT_TRUE(ValidateExperimentConfig(valid, "x.yaml").ok()) << ValidateExperimentConfig(valid, "x.yaml");
  ExperimentConfig c = valid;
  c.mutable_data()->set_train_files("nothing-*");
  absl::Status s = ValidateExperimentConfig(c, "x.yaml");
  EXPECT_THAT(std::string(s.message()), HasSubstr("data.train_files"));
  c = valid;
  c.mutable_data()->set_prefetch_batches(0);
  s = ValidateExperimentConfig(c, "x.yaml");
  EXPECT_THAT(std::string(s.message()), HasSubstr("data.prefetch_batches"));
}

}  // namespace
}  // namespace pstrain
