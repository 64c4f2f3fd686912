// image_folder: JPEG and PNG files in class folders (ImageNet's layout,
// common/data/image_folder.h), read and decoded batch by batch
// (common/data/file_decoder.h). The training split is data.path/train (or
// data.path itself when it has no train/ and validation/), the evaluation
// split data.path/validation. The example shape is model.input_shape, or
// [channels, height, width] of the first image, where channels is 1 when
// every sampled image is grey, else 3; the class count is
// model.num_classes, or the number of class folders. The transform ("auto"
// resolved) comes from a sample of the training images.
#include "common/data/image_folder.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/data/data_source.h"
#include "common/data/file_decoder.h"
#include "common/data/image/codec.h"
#include "common/data/image_transform.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

absl::StatusOr<std::string> ReadWhole(const LabelledFile& file) {
  std::ifstream in(file.path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", file.path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// model.input_shape, else [channels the sampled images store, height, width
// of the first image].
absl::StatusOr<Shape> ExampleShape(const ModelConfig& m, const LabelledFile& first, const StoredImages& stored) {
  if (m.input_shape_size() == 3) return Shape(m.input_shape().begin(), m.input_shape().end());
  PSTRAIN_ASSIGN_OR_RETURN(const std::string bytes, ReadWhole(first));
  absl::StatusOr<image::ImageInfo> info = image::ReadImageInfo(bytes);
  if (!info.ok()) return absl::InvalidArgumentError(absl::StrCat(first.path, ": ", info.status().message()));
  return Shape{stored.channels, info->height, info->width};
}

Dataset MakeSplit(std::vector<LabelledFile> files, const ImageTransform& t, int classes, bool skip_corrupt) {
  Dataset data;
  data.num_examples = static_cast<int64_t>(files.size());
  data.example_shape = t.example_shape;
  data.num_classes = classes;
  data.preprocessing = t.description;
  data.decoder = std::make_shared<FileDecoder>(std::move(files), t, skip_corrupt);
  return data;
}

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  const DataConfig& d = config.data();
  PSTRAIN_ASSIGN_OR_RETURN(ImageFolder folder, ListImageFolder(d.path()));
  if (with_test && (!folder.has_validation || folder.validation.empty())) {
    return absl::InvalidArgumentError(absl::StrCat("data.source image_folder: evaluation needs images in ", d.path(),
                                                   "/validation/<class>/ (or set train.evaluate: false)"));
  }
  const std::vector<LabelledFile>& train = folder.train;
  PSTRAIN_ASSIGN_OR_RETURN(const StoredImages stored,
                           SampleStoredImages(
                               static_cast<int64_t>(train.size()), [&train](int64_t i) { return ReadWhole(train[i]); },
                               [&train](int64_t i) { return train[i].path; }));
  const ModelConfig& m = config.model();
  PSTRAIN_ASSIGN_OR_RETURN(const Shape shape, ExampleShape(m, train.front(), stored));
  const int classes = m.has_num_classes() ? m.num_classes() : static_cast<int>(folder.classes.size());
  if (static_cast<int>(folder.classes.size()) > classes) {
    return absl::InvalidArgumentError(absl::StrCat("data.source image_folder: ", folder.classes.size(),
                                                   " class folders but model.num_classes is ", classes));
  }
  PSTRAIN_ASSIGN_OR_RETURN(const ImageTransform t, ChooseTransform(d, shape, stored));
  Datasets data;
  data.train = MakeSplit(std::move(folder.train), t, classes, d.skip_corrupt());
  if (with_test) data.test = MakeSplit(std::move(folder.validation), t, classes, d.skip_corrupt());
  return data;
}

absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  const DataConfig& d = config.data();
  if (d.path().empty() || !std::filesystem::is_directory(d.path())) {
    return ck.Fail("data.path", "a directory of class folders (or of train/ and validation/ ones)",
                   absl::StrCat("'", d.path(), "'"));
  }
  return CheckDecodeFields(d, ck);
}

const bool kRegistered = DataSourceRegistry().Register("image_folder", {Load, Check});

}  // namespace
}  // namespace pstrain
