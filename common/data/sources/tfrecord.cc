// tfrecord: tf.train.Example records of encoded images (JPEG or PNG) in
// TFRecord files, as TensorFlow's ImageNet build scripts and pstrain-data
// write them (docs/DATA.md). Every record is indexed at load (headers only)
// and decoded when a batch needs it (common/data/tfrecord_decoder.h).
//
// The example shape is model.input_shape, or [channels, height, width] of
// the first record (image/channels, default 3); the class count is
// model.num_classes, or the lines of labels.txt in data.path.
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

// The first record's image: [channels, height, width].
absl::StatusOr<Shape> ShapeOfFirstRecord(const data::RecordSet& records) {
  if (records.size() == 0) return absl::InvalidArgumentError("no records to take the example shape from");
  std::string bytes;
  PSTRAIN_RETURN_IF_ERROR(records.Read(0, &bytes));
  PSTRAIN_ASSIGN_OR_RETURN(const data::ImageExample example, data::ParseImageExample(bytes));
  PSTRAIN_ASSIGN_OR_RETURN(const image::ImageInfo info, image::ReadImageInfo(example.encoded));
  const int64_t channels = example.channels > 0 ? example.channels : 3;
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

absl::StatusOr<Dataset> LoadSplit(const ExperimentConfig& config, const std::string& files) {
  const DataConfig& d = config.data();
  PSTRAIN_ASSIGN_OR_RETURN(std::vector<std::string> paths, DataFiles(d, files));
  PSTRAIN_ASSIGN_OR_RETURN(data::RecordSet records, data::RecordSet::Index(std::move(paths), d.skip_corrupt()));
  TfRecordDecoderOptions options;
  const ModelConfig& m = config.model();
  Shape shape;
  if (m.input_shape_size() == 3) {
    shape = Shape(m.input_shape().begin(), m.input_shape().end());
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(shape, ShapeOfFirstRecord(records));
  }
  options.transform = TransformFromConfig(d, shape);
  PSTRAIN_ASSIGN_OR_RETURN(options.num_classes, NumClasses(config));
  options.label_offset = d.label_offset();
  options.skip_corrupt = d.skip_corrupt();
  Dataset data;
  data.num_examples = records.size();
  data.example_shape = shape;
  data.num_classes = options.num_classes;
  data.decoder = std::make_shared<TfRecordDecoder>(std::move(records), std::move(options));
  return data;
}

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  Datasets data;
  PSTRAIN_ASSIGN_OR_RETURN(data.train, LoadSplit(config, config.data().train_files()));
  if (with_test) {
    PSTRAIN_ASSIGN_OR_RETURN(data.test, LoadSplit(config, config.data().eval_files()));
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
