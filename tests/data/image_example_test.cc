// tf.train.Example images (common/data/records/image_example.h).
#include "common/data/records/image_example.h"

#include <functional>
#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/tf_example.pb.h"

namespace pstrain::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ImageExampleTest, RoundTrip) {
  ImageExample image;
  image.encoded = std::string("\xff\xd8\xff\xe0 jpeg \0 bytes", 18);
  image.label = 417;
  image.format = "JPEG";
  image.height = 375;
  image.width = 500;
  image.bbox = {0.1f, 0.2f, 0.9f, 0.8f, 0.0f, 0.0f, 1.0f, 1.0f};
  absl::StatusOr<ImageExample> parsed = ParseImageExample(SerializeImageExample(image));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->encoded, image.encoded);
  EXPECT_EQ(parsed->label, 417);
  EXPECT_EQ(parsed->format, "JPEG");
  EXPECT_EQ(parsed->height, 375);
  EXPECT_EQ(parsed->width, 500);
  EXPECT_EQ(parsed->bbox, image.bbox);

  ImageExample bare;
  bare.encoded = "png";
  parsed = ParseImageExample(SerializeImageExample(bare));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->label, 0);
  EXPECT_TRUE(parsed->format.empty());
  EXPECT_TRUE(parsed->bbox.empty());
}

// An Example with the keys build_imagenet_data.py writes, its bytes built
// by hand with TF's field numbers: Example.features = 1, Features.feature = 1
// (map entries: key = 1, value = 2), Feature.bytes_list = 1, float_list = 2,
// int64_list = 3, each list's value = 1 (packed for numbers).
std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(int number, const std::string& bytes) {  // length-delimited
  return Varint(static_cast<uint64_t>(number) << 3 | 2) + Varint(bytes.size()) + bytes;
}
std::string Entry(const std::string& key, const std::string& feature) {
  return Field(1, Field(1, key) + Field(2, feature));
}
std::string BytesFeature(const std::string& v) { return Field(1, Field(1, v)); }
std::string Int64Feature(int64_t v) { return Field(3, Field(1, Varint(static_cast<uint64_t>(v)))); }
std::string FloatFeature(float v) {
  std::string le(reinterpret_cast<const char*>(&v), 4);
  return Field(2, Field(1, le));
}

TEST(ImageExampleTest, ParsesTensorFlowsWireFormat) {
  const std::string features =
      Entry("image/height", Int64Feature(333)) + Entry("image/width", Int64Feature(500)) +
      Entry("image/colorspace", BytesFeature("RGB")) + Entry("image/channels", Int64Feature(3)) +
      Entry("image/class/label", Int64Feature(65)) + Entry("image/class/synset", BytesFeature("n01751748")) +
      Entry("image/object/bbox/xmin", FloatFeature(0.25f)) + Entry("image/object/bbox/ymin", FloatFeature(0.5f)) +
      Entry("image/object/bbox/xmax", FloatFeature(0.75f)) + Entry("image/object/bbox/ymax", FloatFeature(1.0f)) +
      Entry("image/object/bbox/label", Int64Feature(65)) + Entry("image/format", BytesFeature("JPEG")) +
      Entry("image/filename", BytesFeature("n01751748_1.JPEG")) + Entry("image/encoded", BytesFeature("JFIF..."));
  absl::StatusOr<ImageExample> parsed = ParseImageExample(Field(1, features));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->encoded, "JFIF...");
  EXPECT_EQ(parsed->label, 65);
  EXPECT_EQ(parsed->format, "JPEG");
  EXPECT_EQ(parsed->height, 333);
  EXPECT_EQ(parsed->width, 500);
  EXPECT_THAT(parsed->bbox, ElementsAre(0.25f, 0.5f, 0.75f, 1.0f));

  // Validation images carry empty bbox lists: no boxes.
  const std::string no_boxes =
      Entry("image/class/label", Int64Feature(1)) + Entry("image/encoded", BytesFeature("x")) +
      Entry("image/object/bbox/xmin", Field(2, "")) + Entry("image/object/bbox/ymin", Field(2, "")) +
      Entry("image/object/bbox/xmax", Field(2, "")) + Entry("image/object/bbox/ymax", Field(2, ""));
  parsed = ParseImageExample(Field(1, no_boxes));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->bbox.empty());
}

google::protobuf::Map<std::string, tfexample::Feature>& features(tfexample::Example* e) {
  return *e->mutable_features()->mutable_feature();
}

// The message of ParseImageExample on an Example built by `edit`.
std::string ErrorOf(const std::function<void(tfexample::Example*)>& edit) {
  ImageExample image;
  image.encoded = "img";
  image.label = 3;
  image.bbox = {0, 0, 1, 1};
  tfexample::Example example;
  EXPECT_TRUE(example.ParseFromString(SerializeImageExample(image)));
  edit(&example);
  absl::StatusOr<ImageExample> parsed = ParseImageExample(example.SerializeAsString());
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  return std::string(parsed.status().message());
}

TEST(ImageExampleTest, NamedErrors) {
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e).erase("image/encoded"); }), HasSubstr("image/encoded: missing"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e).erase("image/class/label"); }),
              HasSubstr("image/class/label: missing"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e)["image/class/label"].mutable_float_list()->add_value(1); }),
              HasSubstr("image/class/label: expected an int64 list, got a float list"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e)["image/encoded"].mutable_int64_list(); }),
              HasSubstr("image/encoded: expected a bytes list, got an int64 list"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e)["image/class/label"].mutable_int64_list()->add_value(4); }),
              HasSubstr("image/class/label: expected 1 value, got 2"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e)["image/height"].mutable_bytes_list()->add_value("x"); }),
              HasSubstr("image/height: expected an int64 list"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e).erase("image/object/bbox/ymax"); }),
              HasSubstr("image/object/bbox/ymax: missing"));
  EXPECT_THAT(ErrorOf([&](auto* e) { features(e)["image/object/bbox/xmax"].mutable_float_list()->add_value(1); }),
              HasSubstr("image/object/bbox/xmax: 2 values, but image/object/bbox/xmin has 1"));
}

TEST(ImageExampleTest, NotAnExample) {
  absl::StatusOr<ImageExample> parsed = ParseImageExample("\xff\xff\xff");
  EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
  EXPECT_THAT(parsed.status().message(), HasSubstr("not a tf.train.Example"));
  parsed = ParseImageExample("");  // parses, as an Example without features
  EXPECT_THAT(parsed.status().message(), HasSubstr("image/encoded: missing"));
}

TEST(ImageExampleTest, GarbageNeverCrashes) {
  ImageExample image;
  image.encoded = std::string(64, 'j');
  image.label = 7;
  image.format = "PNG";
  image.bbox = {0, 0, 1, 1};
  const std::string valid = SerializeImageExample(image);
  std::mt19937 rng(1);
  int ok = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = valid;
    if (round % 2 == 0) {
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) bytes[rng() % bytes.size()] = rng();
      bytes.resize(rng() % (bytes.size() + 1));
    } else {
      bytes.resize(rng() % 64);
      for (char& c : bytes) c = static_cast<char>(rng());
    }
    absl::StatusOr<ImageExample> parsed = ParseImageExample(bytes);
    ok += parsed.ok();
    if (!parsed.ok()) {
      EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
    }
  }
  EXPECT_GT(ok, 0);
}

}  // namespace
}  // namespace pstrain::data
