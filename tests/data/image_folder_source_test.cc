// data.source image_folder over folders made here with a known answer: PNG
// files of one colour per class, so a decoded example is its class's colour
// / 255 (resize, no normalisation); a file that is no image is refused
// naming it, or skipped and counted.
#include <filesystem>
#include <string>
#include <vector>

#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "common/data/decode_pool.h"
#include "common/data/image/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

uint8_t Level(int label) { return static_cast<uint8_t>(30 + 90 * label); }

std::string Png(uint8_t level) {
  image::Image img;
  img.width = 10;
  img.height = 6;
  img.channels = 3;
  img.pixels.assign(10 * 6 * 3, level);
  absl::StatusOr<std::string> png = image::EncodePng(img);
  EXPECT_TRUE(png.ok());
  return png.ok() ? *png : std::string();
}

// dir/<split>/<class>/<i>.png, classes "a" and "b" (labels 0 and 1).
void MakeFolder(const std::string& dir) {
  for (const char* split : {"train", "validation"}) {
    for (int label = 0; label < 2; ++label) {
      const fs::path cls = fs::path(dir) / split / (label == 0 ? "a" : "b");
      fs::create_directories(cls);
      for (int i = 0; i < 3; ++i) WriteFile((cls / (std::to_string(i) + ".png")).string(), Png(Level(label)));
    }
  }
}

ExperimentConfig Config(const std::string& dir) {
  ExperimentConfig c;
  c.mutable_data()->set_source("image_folder");
  c.mutable_data()->set_path(dir);
  c.mutable_data()->set_augmentation(DataConfig::resize);
  c.mutable_data()->mutable_normalization()->set_preset(NormalizationConfig::none);
  for (int d : {3, 4, 4}) c.mutable_model()->add_input_shape(d);
  return c;
}

absl::Status FillAll(const Dataset& data, DecodePool& pool, Tensor* images, std::vector<int32_t>* labels) {
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data, 0, 1, data.num_examples, 1, false);
  if (!batcher.ok()) return batcher.status();
  return batcher->Fill(0, images, labels, &pool);
}

TEST(ImageFolderSourceTest, ClassFoldersAreLabelsAndImagesDecodeToTheirColours) {
  TempDir dir;
  MakeFolder(dir.path());
  absl::StatusOr<Datasets> data = LoadDatasets(Config(dir.path()), /*with_test=*/true);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->train.num_examples, 6);
  EXPECT_EQ(data->test.num_examples, 6);
  EXPECT_EQ(data->train.num_classes, 2);
  DecodePool pool(2);
  Tensor images;
  std::vector<int32_t> labels;
  ASSERT_TRUE(FillAll(data->train, pool, &images, &labels).ok());
  EXPECT_EQ(labels, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  for (int i = 0; i < 6; ++i) {
    for (int k = 0; k < 48; ++k) ASSERT_NEAR(images.data()[i * 48 + k], Level(labels[i]) / 255.0f, 1e-6);
  }
}

TEST(ImageFolderSourceTest, AFileThatIsNoImageIsNamedOrSkipped) {
  TempDir dir;
  MakeFolder(dir.path());
  const std::string bad = dir.path() + "/train/b/9.jpg";
  WriteFile(bad, "plain text, not a JPEG");
  absl::StatusOr<Datasets> data = LoadDatasets(Config(dir.path()), false);
  ASSERT_TRUE(data.ok());
  DecodePool pool(1);
  Tensor images;
  std::vector<int32_t> labels;
  const absl::Status s = FillAll(data->train, pool, &images, &labels);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(bad));

  ExperimentConfig c = Config(dir.path());
  c.mutable_data()->set_skip_corrupt(true);
  absl::StatusOr<Datasets> skipping = LoadDatasets(c, false);
  ASSERT_TRUE(skipping.ok());
  EXPECT_TRUE(FillAll(skipping->train, pool, &images, &labels).ok());
  EXPECT_EQ(skipping->train.decoder->skipped(), 1);
}

TEST(ImageFolderSourceTest, EvaluationWithoutAValidationFolderIsRefused) {
  TempDir dir;
  MakeFolder(dir.path());
  fs::remove_all(dir.path() + "/validation");
  fs::rename(dir.path() + "/train/a", dir.path() + "/a");
  fs::rename(dir.path() + "/train/b", dir.path() + "/b");
  fs::remove_all(dir.path() + "/train");
  absl::StatusOr<Datasets> train_only = LoadDatasets(Config(dir.path()), false);
  ASSERT_TRUE(train_only.ok()) << train_only.status();
  EXPECT_EQ(train_only->train.num_examples, 6);
  absl::StatusOr<Datasets> with_test = LoadDatasets(Config(dir.path()), true);
  EXPECT_THAT(std::string(with_test.status().message()), HasSubstr("evaluation needs images in"));
}

}  // namespace
}  // namespace pstrain
