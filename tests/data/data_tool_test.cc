// pstrain-data convert and validate (tools/data/) on real Fashion-MNIST and
// on image folders made here: what they write reads back with the counts
// and labels it should, and validate finds a damaged record by file and
// offset.
#include <filesystem>
#include <fstream>
#include <string>

#include "common/data/image/codec.h"
#include "common/data/image_folder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"
#include "tools/data/convert.h"
#include "tools/data/validate.h"

namespace pstrain::data_tool {
namespace {

namespace fs = std::filesystem;
using ::pstrain::test::ReadFile;
using ::pstrain::test::TempDir;
using ::pstrain::test::WriteFile;
using ::testing::HasSubstr;

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

TEST(DataToolTest, FashionMnistConvertsToJpegTfRecordsThatValidate) {
  TempDir dir;
  ConvertOptions o;
  o.source = "fashion_mnist";
  o.path = kFashionMnist;
  o.out = dir.path() + "/fm";
  o.train_shards = 3;
  absl::StatusOr<ConvertReport> r = Convert(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->train_examples, 60000);
  EXPECT_EQ(r->validation_examples, 10000);
  EXPECT_EQ(r->num_classes, 10);
  EXPECT_TRUE(fs::exists(o.out + "/train-00002-of-00003"));
  EXPECT_TRUE(fs::exists(o.out + "/validation-00000-of-00001"));
  EXPECT_EQ(ReadFile(o.out + "/labels.txt").substr(0, 20), "T-shirt/top\nTrouser\n");

  absl::StatusOr<ValidateReport> v = Validate({o.out + "/train-*", /*decode=*/true});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->files, 3);
  EXPECT_EQ(v->records, 60000);
  EXPECT_TRUE(v->problems.empty());
  ASSERT_EQ(v->per_label.size(), 10u);
  for (const auto& [label, count] : v->per_label) EXPECT_EQ(count, 6000) << "label " << label;

  // A second conversion into the same directory is refused.
  absl::StatusOr<ConvertReport> again = Convert(o);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
}

// --first_label 1: the labels TensorFlow's ImageNet scripts would store.
TEST(DataToolTest, FirstLabelShiftsTheStoredLabels) {
  TempDir dir;
  ConvertOptions o;
  o.source = "fashion_mnist";
  o.path = kFashionMnist;
  o.out = dir.path() + "/fm";
  o.train_shards = 1;
  o.first_label = 1;
  ASSERT_TRUE(Convert(o).ok());
  absl::StatusOr<ValidateReport> v = Validate({o.out + "/validation-*", /*decode=*/false});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->per_label.size(), 10u);
  EXPECT_EQ(v->per_label.begin()->first, 1);
  EXPECT_EQ(v->per_label.rbegin()->first, 10);
}

// --format folder: the same images as class folders, in label order by
// name, which the image_folder source lists back.
TEST(DataToolTest, FashionMnistConvertsToClassFoldersTheImageFolderSourceReads) {
  TempDir dir;
  ConvertOptions o;
  o.source = "fashion_mnist";
  o.path = kFashionMnist;
  o.out = dir.path() + "/fm";
  o.format = "folder";
  absl::StatusOr<ConvertReport> r = Convert(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->train_examples, 60000);
  absl::StatusOr<ImageFolder> folder = ListImageFolder(o.out);
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_EQ(folder->classes.size(), 10u);
  EXPECT_EQ(folder->classes[0], "00-T-shirt_top");
  EXPECT_EQ(folder->classes[9], "09-Ankle_boot");
  EXPECT_EQ(folder->train.size(), 60000u);
  EXPECT_EQ(folder->validation.size(), 10000u);
  std::vector<int> per_class(10, 0);
  for (const LabelledFile& f : folder->validation) ++per_class[f.label];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], 1000) << "class " << c;
  absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(ReadFile(folder->train.front().path));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->channels, 1);
  EXPECT_EQ(info->width, 28);
  EXPECT_EQ(Convert(o).status().code(), absl::StatusCode::kAlreadyExists) << "a second conversion into it";
}

// A w x h image of one grey level, as JPEG or PNG.
std::string Picture(int w, int h, uint8_t level, bool png) {
  image::Image img;
  img.width = w;
  img.height = h;
  img.channels = 3;
  img.pixels.assign(static_cast<size_t>(w) * h * 3, level);
  absl::StatusOr<std::string> bytes = png ? image::EncodePng(img) : image::EncodeJpeg(img, 90);
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::string();
}

TEST(DataToolTest, AnImageFolderConvertsWithClassesInNameOrderAndValidateFindsDamage) {
  TempDir dir;
  const std::string src = dir.path() + "/photos";
  for (const char* split : {"train", "validation"}) {
    for (const char* cls : {"cat", "ant", "bee"}) {
      fs::create_directories(fs::path(src) / split / cls);
      for (int i = 0; i < (std::string(split) == "train" ? 4 : 2); ++i) {
        const bool png = i % 2 == 1;
        WriteFile(src + "/" + split + "/" + cls + "/" + std::to_string(i) + (png ? ".png" : ".jpg"),
                  Picture(30 + i, 20, static_cast<uint8_t>(i * 40), png));
      }
    }
  }
  WriteFile(src + "/train/ant/notes.txt", "not an image, skipped by its extension");
  ConvertOptions o;
  o.source = "image_folder";
  o.path = src;
  o.out = dir.path() + "/out";
  o.train_shards = 2;
  absl::StatusOr<ConvertReport> r = Convert(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->train_examples, 12);
  EXPECT_EQ(r->validation_examples, 6);
  EXPECT_EQ(ReadFile(o.out + "/labels.txt"), "ant\nbee\ncat\n");

  absl::StatusOr<ValidateReport> v = Validate({o.out + "/train-*", false});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->records, 12);
  EXPECT_EQ(v->per_label.at(0), 4);
  EXPECT_EQ(v->per_label.at(2), 4);

  // Damage the first record's data in one shard: reported with file and offset.
  const std::string shard = o.out + "/train-00001-of-00002";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x7f');
  }
  v = Validate({o.out + "/train-*", false});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->records, 11);
  ASSERT_EQ(v->problems.size(), 1u);
  EXPECT_THAT(v->problems[0], HasSubstr(shard));
  EXPECT_THAT(v->problems[0], HasSubstr("offset 0"));
  EXPECT_THAT(FormatValidateReport(*v), HasSubstr("bad: "));
}

TEST(DataToolTest, BadOptionsAndSourcesAreNamed) {
  TempDir dir;
  ConvertOptions o;
  o.source = "cifar100";
  o.path = dir.path();
  o.out = dir.path() + "/out";
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("--source must be"));
  o.source = "image_folder";
  o.path = dir.path() + "/missing";
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("is not a directory"));
  o.jpeg_quality = 0;
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("--quality"));
  o.jpeg_quality = 95;
  o.format = "lmdb";
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("--format must be tfrecord or folder, got 'lmdb'"));
  o.format = "folder";
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("--format folder converts --source fashion_mnist"));
  o.source = "fashion_mnist";
  o.first_label = 1;
  EXPECT_THAT(std::string(Convert(o).status().message()), HasSubstr("--first_label applies to --format tfrecord"));
  EXPECT_EQ(Validate({dir.path() + "/none-*", false}).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain::data_tool
