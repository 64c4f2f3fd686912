#include "tools/data/convert.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/idx_reader.h"
#include "common/data/image/codec.h"
#include "common/data/records/image_example.h"
#include "common/status_macros.h"
#include "tools/data/convert_folder.h"
#include "tools/data/folder_writer.h"
#include "tools/data/shard_writer.h"

namespace pstrain::data_tool {
namespace fs = std::filesystem;
namespace {

const char* const kFashionMnistClasses[] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// Example i of an in-memory dataset (pixels in [0, 1]) encoded as an image.
absl::StatusOr<data::ImageExample> EncodeExample(const Dataset& d, int64_t i, const ConvertOptions& o) {
  image::Image img;
  img.channels = static_cast<int>(d.example_shape[0]);
  img.height = static_cast<int>(d.example_shape[1]);
  img.width = static_cast<int>(d.example_shape[2]);
  const int64_t plane = int64_t{img.height} * img.width;
  img.pixels.resize(plane * img.channels);
  const float* src = d.images.data() + i * plane * img.channels;
  for (int64_t p = 0; p < plane; ++p) {
    for (int c = 0; c < img.channels; ++c) {
      const float v = std::clamp(src[c * plane + p], 0.0f, 1.0f);
      img.pixels[p * img.channels + c] = static_cast<uint8_t>(v * 255.0f + 0.5f);
    }
  }
  data::ImageExample example;
  if (o.image_format == "png") {
    PSTRAIN_ASSIGN_OR_RETURN(example.encoded, image::EncodePng(img));
    example.format = "PNG";
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(example.encoded, image::EncodeJpeg(img, o.jpeg_quality));
    example.format = "JPEG";
  }
  example.label = d.labels[i] + o.first_label;
  example.height = img.height;
  example.width = img.width;
  example.channels = img.channels;
  return example;
}

absl::Status ConvertFashionMnist(const ConvertOptions& o, ConvertReport* report) {
  PSTRAIN_ASSIGN_OR_RETURN(const Dataset train, LoadFashionMnist(o.path, "train"));
  PSTRAIN_ASSIGN_OR_RETURN(const Dataset test, LoadFashionMnist(o.path, "test"));
  const SplitSource t{"train", train.num_examples, [&](int64_t i) { return EncodeExample(train, i, o); }};
  const SplitSource v{"validation", test.num_examples, [&](int64_t i) { return EncodeExample(test, i, o); }};
  report->train_examples = train.num_examples;
  report->validation_examples = test.num_examples;
  report->num_classes = 10;
  if (o.format == "folder") {
    const std::vector<std::string> classes(std::begin(kFashionMnistClasses), std::end(kFashionMnistClasses));
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t train_bytes, WriteClassFolders(t, classes, o.out));
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t validation_bytes, WriteClassFolders(v, classes, o.out));
    report->bytes_written += train_bytes + validation_bytes;
    return absl::OkStatus();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t train_bytes, WriteShards(t, o.train_shards, o.out));
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t validation_bytes, WriteShards(v, o.validation_shards, o.out));
  report->bytes_written += train_bytes + validation_bytes;
  std::ofstream labels(fs::path(o.out) / "labels.txt");
  for (const char* name : kFashionMnistClasses) labels << name << "\n";
  return labels ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", o.out, "/labels.txt"));
}

}  // namespace

absl::StatusOr<ConvertReport> Convert(const ConvertOptions& o) {
  if (o.image_format != "jpeg" && o.image_format != "png") {
    return absl::InvalidArgumentError(absl::StrCat("--image_format must be jpeg or png, got '", o.image_format, "'"));
  }
  if (o.jpeg_quality < 1 || o.jpeg_quality > 100) {
    return absl::InvalidArgumentError(absl::StrCat("--quality must be in [1, 100], got ", o.jpeg_quality));
  }
  if (o.train_shards < 1 || o.validation_shards < 1) {
    return absl::InvalidArgumentError("--shards and --validation_shards must be >= 1");
  }
  if (o.format != "tfrecord" && o.format != "folder") {
    return absl::InvalidArgumentError(absl::StrCat("--format must be tfrecord or folder, got '", o.format, "'"));
  }
  if (o.format == "folder" && o.source != "fashion_mnist") {
    return absl::InvalidArgumentError("--format folder converts --source fashion_mnist only (an image folder is one)");
  }
  if (o.format == "folder" && o.first_label != 0) {
    return absl::InvalidArgumentError("--first_label applies to --format tfrecord (folders' order is their labels)");
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("cannot create --out ", o.out, ": ", ec.message()));
  for (const auto& entry : fs::directory_iterator(o.out)) {
    const std::string n = entry.path().filename().string();
    if (n.rfind("train-", 0) == 0 || n.rfind("validation-", 0) == 0 || n == "train" || n == "validation") {
      return absl::AlreadyExistsError(absl::StrCat("--out ", o.out, " already holds ", n, "; use an empty directory"));
    }
  }
  ConvertReport report;
  if (o.source == "fashion_mnist") {
    PSTRAIN_RETURN_IF_ERROR(ConvertFashionMnist(o, &report));
  } else if (o.source == "image_folder") {
    PSTRAIN_RETURN_IF_ERROR(ConvertImageFolder(o, &report));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--source must be fashion_mnist or image_folder, got '", o.source, "'"));
  }
  return report;
}

}  // namespace pstrain::data_tool
