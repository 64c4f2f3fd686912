// tfrecord: tf.train.Example records of encoded images (JPEG or PNG) in
// TFRecord files, as TensorFlow's ImageNet build scripts and pstrain-data
// write them (docs/DATA.md). Every record is indexed at load (headers only)
// and decoded when a batch needs it (common/data/tfrecord_decoder.h).
//
// The example shape is model.input_shape, or [channels, height, width] of
// the first record (image/channels, else what the images store); the class
// count is model.num_classes, or the lines of labels.txt in data.path. The
// transform ("auto" augmentation and normalization resolved) is chosen from
// a sample of the training records and used for both splits.
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/data/data_source.h"
#include "common/data/image/codec.h"
#include "common/data/image_transform.h"
#include "common/data/records/image_example.h"
#include "common/data/records/record_file.h"
#include "common/data/tfrecord_decoder.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// The encoded image of record i.
absl::StatusOr<std::string> EncodedImage(const data::RecordSet& records, int64_t i) {
  std::string bytes;
  PSTRAIN_RETURN_IF_ERROR(records.Read(i, &bytes));
  PSTRAIN_ASSIGN_OR_RETURN(data::ImageExample example, data::ParseImageExample(bytes));
  return std::move(example.encoded);
}

// model.input_shape, else [channels, height, width] of the first record
// (image/channels, else what the sampled images store).
absl::StatusOr<Shape> ExampleShape(const ExperimentConfig& config, const data::RecordSet& records,
                                   const StoredImages& stored) {
  const ModelConfig& m = config.model();
  if (m.input_shape_size() == 3) return Shape(m.input_shape().begin(), m.input_shape().end());
  std::string bytes;
  PSTRAIN_RETURN_IF_ERROR(records.Read(0, &bytes));
  PSTRAIN_ASSIGN_OR_RETURN(const data::ImageExample example, data::ParseImageExample(bytes));
  PSTRAIN_ASSIGN_OR_RETURN(const image::ImageInfo info, image::ReadImageInfo(example.encoded));
  const int64_t channels = example.channels > 0 ? example.channels : stored.channels;
  return Shape{channels, info.height, info.width};
}

// model.num_classes, else the lines of data.path/labels.txt.
absl::StatusOr<int> NumClasses(const ExperimentConfig& config) {
  if (config.model().has_num_classes()) return config.model().num_classes();
  const std::filesystem::path labels = std::filesystem::path(config.data().path()) / "labels.txt";
  std::ifstream in(labels);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.source tfrecord: set model.num_classes (no ", labels.string(), " to count the classes in)"));
  }
  int lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.empty() ? 0 : 1;
  return lines;
}

absl::StatusOr<data::RecordSet> IndexRecords(const DataConfig& d, const std::string& files) {
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> paths, DataFiles(d, files));
  return data::RecordSet::Index(std::move(paths), d.skip_corrupt());
}

Dataset MakeSplit(data::RecordSet records, const TfRecordDecoderOptions& options) {
  Dataset data;
  data.num_examples = records.size();
  data.example_shape = options.transform.example_shape;
  data.num_classes = options.num_classes;
  data.preprocessing = options.transform.description;
  data.decoder = std::make_shared<TfRecordDecoder>(std::move(records), options);
  return data;
}

// Both splits go through the transform chosen from the training records.
absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  const DataConfig& d = config.data();
  PSTRAIN_ASSIGN_OR_RETURN(data::RecordSet train, IndexRecords(d, d.train_files()));
  if (train.size() == 0) return absl::InvalidArgumentError("data.source tfrecord: no training records");
  PSTRAIN_ASSIGN_OR_RETURN(const StoredImages stored,
                           SampleStoredImages(
                               train.size(), [&train](int64_t i) { return EncodedImage(train, i); },
                               [&train](int64_t i) { return train.Where(i); }));
  PSTRAIN_ASSIGN_OR_RETURN(const Shape shape, ExampleShape(config, train, stored));
  TfRecordDecoderOptions options;
  PSTRAIN_ASSIGN_OR_RETURN(options.transform, ChooseTransform(d, shape, stored));
  PSTRAIN_ASSIGN_OR_RETURN(options.num_classes, NumClasses(config));
  options.label_offset = d.label_offset();
  options.skip_corrupt = d.skip_corrupt();
  Datasets data;
  data.train = MakeSplit(std::move(train), options);
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(data::RecordSet test, IndexRecords(d, d.eval_files()));
    data.test = MakeSplit(std::move(test), options);
  }
  return data;
}

absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  const DataConfig& d = config.data();
  PSTRAIN_RETURN_IF_ERROR(CheckDataFiles(d, ck, "TFRecord files"));
  return CheckDecodeFields(d, ck);
}

const bool kRegistered = DataSourceRegistry().Register("tfrecord", {Load, Check});

}  // namespace
}  // namespace pstrain
