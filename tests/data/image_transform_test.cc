// data.augmentation and data.normalization as "auto" resolves them from the
// stored images (common/data/image_transform.h), what the config's own
// settings do, what is refused, and the header line that says why.
#include "common/data/image_transform.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/config/config_loader.h"
#include "common/data/image/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

std::string Encoded(int channels, int width, int height, uint8_t value, bool png) {
  image::Image img;
  img.channels = channels;
  img.width = width;
  img.height = height;
  img.pixels.assign(static_cast<size_t>(channels) * width * height, value);
  absl::StatusOr<std::string> bytes = png ? image::EncodePng(img) : image::EncodeJpeg(img, 95);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

// The stored images of `images`, as the sources sample them.
StoredImages Sample(const std::vector<std::string>& images) {
  absl::StatusOr<StoredImages> stored = SampleStoredImages(
      static_cast<int64_t>(images.size()), [&](int64_t i) -> absl::StatusOr<std::string> { return images[i]; },
      [](int64_t i) { return "image " + std::to_string(i); });
  EXPECT_TRUE(stored.ok()) << stored.status();
  return stored.ok() ? *stored : StoredImages{};
}

DataConfig Data(const std::string& yaml) {
  absl::StatusOr<ExperimentConfig> c = ParseExperimentYaml("data: " + yaml, "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->data() : DataConfig{};
}

TEST(ImageTransformTest, HeadersTellGreyFromColourInBothFormats) {
  for (bool png : {false, true}) {
    absl::StatusOr<image::ImageInfo> grey = image::ReadImageInfo(Encoded(1, 9, 7, 100, png));
    absl::StatusOr<image::ImageInfo> colour = image::ReadImageInfo(Encoded(3, 9, 7, 100, png));
    ASSERT_TRUE(grey.ok() && colour.ok());
    EXPECT_EQ(grey->channels, 1) << (png ? "png" : "jpeg");
    EXPECT_EQ(colour->channels, 3) << (png ? "png" : "jpeg");
    EXPECT_EQ(grey->width, 9);
    EXPECT_EQ(grey->height, 7);
  }
}

TEST(ImageTransformTest, TheSampleIsColourWhenAnyImageIsAndTakesTheMedianShorterSide) {
  std::vector<std::string> images;
  for (int i = 0; i < 40; ++i) images.push_back(Encoded(i == 37 ? 3 : 1, 100 + i, 80, 50, false));
  const StoredImages stored = Sample(images);
  EXPECT_EQ(stored.sampled, 16);
  EXPECT_EQ(stored.shorter_side, 80);
  EXPECT_EQ(stored.channels, 3);  // image 37 = 15 * 40 / 16 is sampled
  EXPECT_EQ(Sample({Encoded(1, 28, 28, 0, true)}).channels, 1);
}

TEST(ImageTransformTest, BadImagesArePassedOverAndASampleOfNoneIsNamed) {
  const std::vector<std::string> mixed = {"junk", Encoded(1, 30, 30, 0, true)};
  EXPECT_EQ(Sample(mixed).sampled, 1);
  EXPECT_EQ(Sample(mixed).shorter_side, 30);
}

TEST(ImageTransformTest, AHeaderThatIsNoImageIsNamed) {
  absl::StatusOr<StoredImages> stored = SampleStoredImages(
      2, [](int64_t) -> absl::StatusOr<std::string> { return std::string("not an image"); },
      [](int64_t i) { return "shard-0: record " + std::to_string(i); });
  ASSERT_FALSE(stored.ok());
  EXPECT_THAT(stored.status().message(), HasSubstr("shard-0: record 0: not a JPEG or PNG image"));
}

// Fashion-MNIST's case: grey 28 x 28 images into a one-channel model.
TEST(ImageTransformTest, AutoGivesSmallGreyImagesPixelsOver255AndAResize) {
  absl::StatusOr<ImageTransform> t =
      ChooseTransform(Data("{source: tfrecord}"), {1, 28, 28}, Sample({Encoded(1, 28, 28, 0, false)}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_FALSE(t->random_crop);
  EXPECT_EQ(t->normalization.mean[0], 0);
  EXPECT_EQ(t->normalization.stddev[0], 1);
  EXPECT_THAT(t->description, HasSubstr("grey images -> 1x28x28: normalization none: pixel / 255 (auto: a 1-channel "
                                        "input; ImageNet's statistics are per RGB channel)"));
  EXPECT_THAT(t->description, HasSubstr("augmentation resize (auto: 28 px images are under the 64 px"));
}

// Grey images into a three-channel model (replicated) are not ImageNet's colours either.
TEST(ImageTransformTest, AutoGivesGreyImagesNoImageNetStatisticsEvenForThreeChannels) {
  absl::StatusOr<ImageTransform> t =
      ChooseTransform(Data("{source: tfrecord}"), {3, 32, 32}, Sample({Encoded(1, 32, 32, 0, true)}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->normalization.mean[0], 0);
  EXPECT_THAT(t->description, HasSubstr("(auto: grey images"));
}

// ImageNet's case: colour photographs, large enough for the ResNet crop.
TEST(ImageTransformTest, AutoGivesLargeColourImagesImageNetStatisticsAndTheCrop) {
  absl::StatusOr<ImageTransform> t =
      ChooseTransform(Data("{source: tfrecord}"), {3, 224, 224}, Sample({Encoded(3, 500, 375, 0, false)}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->random_crop);
  EXPECT_FLOAT_EQ(t->normalization.mean[1], 0.456f);
  EXPECT_THAT(t->description, HasSubstr("normalization imagenet (auto: colour images into a 3-channel input)"));
  EXPECT_THAT(t->description, HasSubstr("augmentation crop (auto: images of 375 px"));
}

TEST(ImageTransformTest, TheConfigsOwnChoicesWinAndAreSaidToBeItsOwn) {
  const StoredImages small_grey = Sample({Encoded(1, 28, 28, 0, false)});
  absl::StatusOr<ImageTransform> t =
      ChooseTransform(Data("{source: tfrecord, augmentation: crop, normalization: none}"), {1, 28, 28}, small_grey);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->random_crop);
  EXPECT_THAT(t->description, HasSubstr("normalization none: pixel / 255 (the config's)"));
  EXPECT_THAT(t->description, HasSubstr("augmentation crop (the config's)"));
}

TEST(ImageTransformTest, StatisticsOfYourOwnApplyPerChannelOrToAll) {
  const StoredImages colour = Sample({Encoded(3, 40, 40, 0, true)});
  absl::StatusOr<ImageTransform> one =
      ChooseTransform(Data("{source: tfrecord, normalization: {mean: [0.286], std: [0.353]}}"), {1, 28, 28}, colour);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FLOAT_EQ(one->normalization.mean[0], 0.286f);
  EXPECT_FLOAT_EQ(one->normalization.stddev[0], 0.353f);
  EXPECT_THAT(one->description, HasSubstr("normalization mean [0.286] std [0.353] (the config's)"));
  absl::StatusOr<ImageTransform> three = ChooseTransform(
      Data("{source: tfrecord, normalization: {mean: [0.1, 0.2, 0.3], std: [1, 2, 4]}}"), {3, 8, 8}, colour);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_FLOAT_EQ(three->normalization.mean[2], 0.3f);
  EXPECT_FLOAT_EQ(three->normalization.stddev[1], 2.0f);
  // The decoded pixel 0 of channel c is (0 - mean[c]) / std[c].
  std::vector<float> out(3 * 8 * 8);
  ASSERT_TRUE(ApplyTransform(*three, Encoded(3, 8, 8, 0, true), 1, /*train=*/false, out.data()).ok());
  EXPECT_FLOAT_EQ(out[0], -0.1f);
  EXPECT_FLOAT_EQ(out[64], -0.1f);
  EXPECT_FLOAT_EQ(out[128], -0.3f / 4);
}

TEST(ImageTransformTest, ImageNetStatisticsForAOneChannelInputAreRefusedNamingTheField) {
  absl::StatusOr<ImageTransform> t = ChooseTransform(Data("{source: tfrecord, normalization: imagenet}"), {1, 28, 28},
                                                     Sample({Encoded(1, 28, 28, 0, false)}));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("data.normalization imagenet"));
  EXPECT_THAT(t.status().message(), HasSubstr("model's input has 1 channel"));
  absl::StatusOr<ImageTransform> wrong =
      ChooseTransform(Data("{source: tfrecord, normalization: {mean: [0.1, 0.2, 0.3], std: [1, 1, 1]}}"), {1, 28, 28},
                      Sample({Encoded(1, 28, 28, 0, false)}));
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("3 mean/std values for a model input of 1 channels"));
}

TEST(ImageTransformTest, TheConfigCheckRefusesBadSettingsNamingTheField) {
  const ConfigChecker ck("exp.yaml");
  // Unknown augmentation and preset names are refused by the loader
  // (config_loader_test.cc, ClosedChoiceTest).
  EXPECT_THAT(CheckDecodeFields(Data("{normalization: {mean: [0.5]}}"), ck).message(),
              HasSubstr("expected mean and std of the same length"));
  EXPECT_THAT(CheckDecodeFields(Data("{normalization: {mean: [0.5, 0.5], std: [1, 1]}}"), ck).message(),
              HasSubstr("field 'data.normalization.mean': expected 1 or 3 values"));
  EXPECT_THAT(CheckDecodeFields(Data("{normalization: {mean: [0.5], std: [0]}}"), ck).message(),
              HasSubstr("field 'data.normalization.std[0]': expected a number > 0"));
  EXPECT_THAT(CheckDecodeFields(Data("{normalization: {preset: none, mean: [0.5], std: [1]}}"), ck).message(),
              HasSubstr("field 'data.normalization.preset': expected auto (unset) beside mean and std"));
  EXPECT_TRUE(CheckDecodeFields(Data("{normalization: {mean: [0.5], std: [0.25]}}"), ck).ok());
  EXPECT_TRUE(CheckDecodeFields(Data("{}"), ck).ok());
}

}  // namespace
}  // namespace pstrain
