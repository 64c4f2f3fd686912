// common/data/image/codec.h: known patterns round trip (PNG exactly, JPEG
// within a tolerance), grey <-> RGB, scaled JPEG decoding, formats and
// headers, and hostile bytes refused as INVALID_ARGUMENT without a crash.
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/data/image/codec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/image_test_util.h"

namespace pstrain::image {
namespace {

using test::Jpeg;
using test::MeanAbsDiff;
using test::Pattern;
using test::Png;
using ::testing::HasSubstr;

TEST(ImageCodecTest, PngRoundTripsExactly) {
  for (int channels : {1, 3}) {
    const Image img = Pattern(37, 23, channels);
    absl::StatusOr<Image> back = DecodeImage(Png(img), channels);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->width, 37);
    EXPECT_EQ(back->height, 23);
    EXPECT_EQ(back->channels, channels);
    EXPECT_EQ(back->pixels, img.pixels);
  }
}

TEST(ImageCodecTest, JpegRoundTripsWithinATolerance) {
  for (int channels : {1, 3}) {
    const Image img = Pattern(64, 48, channels);
    absl::StatusOr<Image> back = DecodeImage(Jpeg(img), channels);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->width, 64);
    EXPECT_EQ(back->height, 48);
    EXPECT_EQ(back->channels, channels);
    EXPECT_LT(MeanAbsDiff(img, *back), 3.0) << channels;
  }
}

TEST(ImageCodecTest, GreyAndRgbConvert) {
  const Image grey = Pattern(16, 16, 1);
  const Image rgb = Pattern(16, 16, 3);
  for (const std::string& bytes : {Png(grey), Jpeg(grey)}) {
    absl::StatusOr<Image> as_rgb = DecodeImage(bytes, 3);
    ASSERT_TRUE(as_rgb.ok()) << as_rgb.status();
    ASSERT_EQ(as_rgb->pixels.size(), 16u * 16 * 3);
    for (size_t i = 0; i < 16 * 16; ++i) {  // replicated
      EXPECT_EQ(as_rgb->pixels[3 * i], as_rgb->pixels[3 * i + 1]);
      EXPECT_EQ(as_rgb->pixels[3 * i], as_rgb->pixels[3 * i + 2]);
    }
  }
  // Colour to grey is BT.601 luma, for the PNG exactly (+-1 for rounding).
  absl::StatusOr<Image> luma = DecodeImage(Png(rgb), 1);
  ASSERT_TRUE(luma.ok()) << luma.status();
  ASSERT_EQ(luma->pixels.size(), 16u * 16);
  for (size_t i = 0; i < luma->pixels.size(); ++i) {
    const double y = 0.299 * rgb.pixels[3 * i] + 0.587 * rgb.pixels[3 * i + 1] + 0.114 * rgb.pixels[3 * i + 2];
    EXPECT_NEAR(luma->pixels[i], y, 1.0) << i;
  }
  absl::StatusOr<Image> jpeg_luma = DecodeImage(Jpeg(rgb), 1);
  ASSERT_TRUE(jpeg_luma.ok()) << jpeg_luma.status();
  EXPECT_EQ(jpeg_luma->channels, 1);
  EXPECT_LT(MeanAbsDiff(*luma, *jpeg_luma), 4.0);
}

TEST(ImageCodecTest, ScaledJpegDecodeIsTheSmallestSizeStillLargeEnough) {
  const std::string jpeg = Jpeg(Pattern(800, 600, 3));
  struct Case {
    int min_w, min_h, want_w, want_h;
  };
  // The factors used are 1/8 (100x75), 1/4 (200x150), 1/2 (400x300) and 1.
  for (const Case& c :
       {Case{100, 75, 100, 75}, Case{101, 10, 200, 150}, Case{10, 76, 200, 150}, Case{300, 200, 400, 300},
        Case{400, 301, 800, 600}, Case{700, 1, 800, 600}, Case{801, 601, 800, 600}}) {
    absl::StatusOr<Image> img = DecodeImage(jpeg, 3, c.min_w, c.min_h);
    ASSERT_TRUE(img.ok()) << img.status();
    EXPECT_EQ(img->width, c.want_w) << c.min_w << "x" << c.min_h;
    EXPECT_EQ(img->height, c.want_h) << c.min_w << "x" << c.min_h;
    EXPECT_EQ(img->pixels.size(), static_cast<size_t>(img->width) * img->height * 3);
  }
  // A PNG is always decoded at full size.
  absl::StatusOr<Image> png = DecodeImage(Png(Pattern(80, 60, 3)), 3, 10, 10);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(png->width, 80);
}

TEST(ImageCodecTest, DetectFormatAndReadInfo) {
  const std::string jpeg = Jpeg(Pattern(33, 17, 3));
  const std::string png = Png(Pattern(33, 17, 1));
  EXPECT_EQ(DetectFormat(jpeg), ImageFormat::kJpeg);
  EXPECT_EQ(DetectFormat(png), ImageFormat::kPng);
  EXPECT_EQ(DetectFormat("GIF89a"), ImageFormat::kUnknown);
  EXPECT_EQ(DetectFormat(""), ImageFormat::kUnknown);
  for (const auto& [bytes, format] : {std::pair{jpeg, ImageFormat::kJpeg}, std::pair{png, ImageFormat::kPng}}) {
    absl::StatusOr<ImageInfo> info = ReadImageInfo(bytes);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->width, 33);
    EXPECT_EQ(info->height, 17);
    EXPECT_EQ(info->format, format);
  }
  absl::StatusOr<ImageInfo> gif = ReadImageInfo("GIF89a");
  EXPECT_TRUE(absl::IsInvalidArgument(gif.status()));
  EXPECT_THAT(gif.status().message(), HasSubstr("not a JPEG or PNG image (starts with 0x474946383961)"));
}

TEST(ImageCodecTest, TruncatedAndRandomBytesAreInvalidArgument) {
  const std::string jpeg = Jpeg(Pattern(64, 64, 3));
  const std::string png = Png(Pattern(64, 64, 3));
  for (size_t cut : {size_t{3}, size_t{20}, jpeg.size() / 2, jpeg.size() - 2}) {
    absl::StatusOr<Image> img = DecodeImage(jpeg.substr(0, cut), 3);
    EXPECT_TRUE(absl::IsInvalidArgument(img.status())) << cut << ": " << img.status();
    EXPECT_THAT(img.status().message(), HasSubstr("corrupt JPEG: ")) << cut;
  }
  // (A PNG cut only after its compressed stream -- the last IDAT's CRC and
  // IEND, 16 bytes -- still has all its pixels and decodes; -20 cuts the
  // stream's checksum.)
  for (size_t cut : {size_t{8}, size_t{20}, png.size() / 2, png.size() - 20}) {
    absl::StatusOr<Image> img = DecodeImage(png.substr(0, cut), 3);
    EXPECT_TRUE(absl::IsInvalidArgument(img.status())) << cut << ": " << img.status();
    EXPECT_THAT(img.status().message(), HasSubstr("corrupt PNG: ")) << cut;
  }
  std::mt19937_64 gen(7);
  for (int i = 0; i < 50; ++i) {
    std::string bytes(1 + gen() % 300, '\0');
    for (char& b : bytes) b = static_cast<char>(gen());
    if (i % 2 == 0) bytes.replace(0, 3, "\xFF\xD8\xFF");  // a JPEG's magic, then garbage
    EXPECT_TRUE(absl::IsInvalidArgument(DecodeImage(bytes, 3).status())) << i;
    const absl::Status info = ReadImageInfo(bytes).status();
    EXPECT_TRUE(info.ok() || absl::IsInvalidArgument(info)) << i << ": " << info;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeImage(jpeg, 2).status()));
}

TEST(ImageCodecTest, AbsurdDimensionsAreRefusedFromTheHeader) {
  // A PNG header claiming 40000 x 40000: refused before any pixel is read.
  std::string png = Png(Pattern(4, 4, 1));
  const uint32_t side = 40000;
  for (int i = 0; i < 2; ++i) {
    for (int b = 0; b < 4; ++b) png[16 + 4 * i + b] = static_cast<char>(side >> (24 - 8 * b));
  }
  absl::StatusOr<ImageInfo> info = ReadImageInfo(png);
  EXPECT_TRUE(absl::IsInvalidArgument(info.status())) << info.status();
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeImage(png, 3).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(EncodeJpeg(Image{40000, 1, 1, std::vector<uint8_t>(40000)}, 90).status()));
}

}  // namespace
}  // namespace pstrain::image
