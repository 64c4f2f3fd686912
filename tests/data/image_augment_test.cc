// common/data/image/augment.h: the crop choice (deterministic, inside, in
// range; eval centred), flip, normalisation, channel conversion, and
// DecodeAugment giving the same output on any thread.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "common/data/image/augment.h"
#include "common/data/image/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/image_test_util.h"

namespace pstrain::image {
namespace {

using test::Constant;
using test::Jpeg;
using test::Pattern;
using test::Png;
using ::testing::HasSubstr;

AugmentOptions Options(bool train, int out = 32, int channels = 3) {
  AugmentOptions o;
  o.out_height = o.out_width = out;
  o.channels = channels;
  o.train = train;
  return o;
}

TEST(AugmentTest, ChooseCropIsDeterministicInsideAndInRange) {
  const AugmentOptions o = Options(true);
  int flips = 0, fallbacks = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const int w = 50 + static_cast<int>(seed % 400), h = 40 + static_cast<int>(seed * 7 % 300);
    bool flip = false, flip2 = true;
    const CropBox box = ChooseCrop(w, h, o, seed, &flip);
    const CropBox again = ChooseCrop(w, h, o, seed, &flip2);
    EXPECT_EQ(box.x, again.x);
    EXPECT_EQ(box.y, again.y);
    EXPECT_EQ(box.width, again.width);
    EXPECT_EQ(box.height, again.height);
    EXPECT_EQ(flip, flip2);
    flips += flip;
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_GT(box.width, 0);
    ASSERT_GT(box.height, 0);
    ASSERT_LE(box.x + box.width, w);
    ASSERT_LE(box.y + box.height, h);
    const double area = box.width * box.height / (double{1} * w * h);
    const double ratio = box.width / box.height;
    // Rounding to whole pixels moves area and ratio a little.
    const bool in_range = area >= 0.08 * 0.9 && area <= 1.0 && ratio >= 0.75 * 0.9 && ratio <= 4.0 / 3 * 1.1;
    fallbacks += !in_range;
  }
  EXPECT_GT(flips, 900);
  EXPECT_LT(flips, 1100);
  EXPECT_EQ(fallbacks, 0);
}

TEST(AugmentTest, EvalCropIsCentred) {
  const AugmentOptions o = Options(false, 224);
  bool flip = true;
  const CropBox box = ChooseCrop(500, 375, o, 123, &flip);
  EXPECT_FALSE(flip);
  EXPECT_NEAR(box.height, 375 * 0.875, 1e-3);  // shorter side to 256, centre 224
  EXPECT_NEAR(box.width, 375 * 0.875, 1e-3);
  EXPECT_NEAR(box.x + box.width / 2, 250, 1e-3);
  EXPECT_NEAR(box.y + box.height / 2, 187.5, 1e-3);
}

TEST(AugmentTest, FlipMirrors) {
  const Image img = Pattern(40, 30, 3);
  const AugmentOptions o = Options(false, 24);
  const CropBox box{3, 2, 30, 20};
  std::vector<float> plain(3 * 24 * 24), mirrored(3 * 24 * 24);
  AugmentInto(img, box, false, o, plain.data());
  AugmentInto(img, box, true, o, mirrored.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 24; ++y) {
      for (int x = 0; x < 24; ++x) {
        ASSERT_EQ(plain[(c * 24 + y) * 24 + x], mirrored[(c * 24 + y) * 24 + 23 - x]) << c << " " << y << " " << x;
      }
    }
  }
}

TEST(AugmentTest, IdentityCropReproducesThePixels) {
  const Image img = Pattern(16, 12, 3);
  AugmentOptions o = Options(false);
  o.out_width = 16, o.out_height = 12, o.norm = kNoNormalization;
  std::vector<float> out(3 * 16 * 12);
  AugmentInto(img, CropBox{0, 0, 16, 12}, false, o, out.data());
  for (int c = 0; c < 3; ++c) {
    for (int i = 0; i < 16 * 12; ++i) ASSERT_FLOAT_EQ(out[c * 192 + i], img.pixels[3 * i + c] / 255.0f);
  }
}

TEST(AugmentTest, NormalisationIsExactOnAConstantImage) {
  for (const Normalization& norm : {kImageNetNormalization, kNoNormalization}) {
    AugmentOptions o = Options(true, 20);
    o.norm = norm;
    const Image img = Constant(50, 40, 3, 200);
    std::vector<float> out(3 * 20 * 20);
    bool flip = false;
    const CropBox box = ChooseCrop(50, 40, o, 5, &flip);
    AugmentInto(img, box, flip, o, out.data());
    for (int c = 0; c < 3; ++c) {
      const float want = static_cast<float>((200 / 255.0 - norm.mean[c]) / norm.stddev[c]);
      for (int i = 0; i < 400; ++i) ASSERT_FLOAT_EQ(out[c * 400 + i], want) << c;
    }
  }
}

TEST(AugmentTest, GreySourceIsReplicatedAndColourBecomesLuma) {
  AugmentOptions o = Options(true, 16);
  o.norm = kNoNormalization;
  std::vector<float> out(3 * 16 * 16);
  ASSERT_TRUE(DecodeAugment(Png(Constant(40, 30, 1, 90)), o, 1, out.data()).ok());
  for (float v : out) ASSERT_FLOAT_EQ(v, 90 / 255.0f);
  o.channels = 1;
  Image red = Constant(40, 30, 3, 0);
  for (size_t i = 0; i < red.pixels.size(); i += 3) red.pixels[i] = 255;
  ASSERT_TRUE(DecodeAugment(Png(red), o, 1, out.data()).ok());
  for (int i = 0; i < 16 * 16; ++i) ASSERT_NEAR(out[i], 0.299f, 1.0f / 255) << i;
}

TEST(AugmentTest, DecodeAugmentRefusesBadInputAndOptions) {
  std::vector<float> out(3 * 32 * 32);
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeAugment("nope", Options(true), 1, out.data())));
  AugmentOptions bad = Options(true);
  bad.min_area = 2;
  EXPECT_THAT(DecodeAugment(Jpeg(Pattern(40, 40, 3)), bad, 1, out.data()).message(), HasSubstr("min_area"));
}

// Per image: the train output of DecodeAugment for seeds [0, n), computed by
// `threads` threads taking images in turn.
std::vector<std::vector<float>> AugmentAll(const std::vector<std::string>& files, int threads) {
  const AugmentOptions o = Options(true, 48);
  std::vector<std::vector<float>> outs(files.size(), std::vector<float>(3 * 48 * 48));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (size_t i = t; i < files.size(); i += threads) {
        EXPECT_TRUE(DecodeAugment(files[i], o, 1000 + i, outs[i].data()).ok());
      }
    });
  }
  for (std::thread& th : pool) th.join();
  return outs;
}

TEST(AugmentTest, DecodeAugmentIsTheSameOnAnyThread) {
  std::vector<std::string> files;
  for (int i = 0; i < 24; ++i) {
    const Image img = Pattern(120 + 13 * i, 90 + 7 * i, i % 5 == 0 ? 1 : 3);
    files.push_back(i % 3 == 0 ? Png(img) : Jpeg(img, 90));
  }
  const std::vector<std::vector<float>> one = AugmentAll(files, 1);
  const std::vector<std::vector<float>> four = AugmentAll(files, 4);
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(one[i], four[i]) << i;
}

}  // namespace
}  // namespace pstrain::image
