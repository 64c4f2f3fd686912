// pstrain-data convert: writes an image dataset as TFRecords of
// tf.train.Example records (JPEG or PNG images), named as TensorFlow's
// ImageNet scripts name them -- train-00000-of-00008, validation-00000-of-00002
// -- plus labels.txt (one class name per line, in label order), so the
// `tfrecord` data source reads them with its defaults (docs/DATA.md); or,
// from fashion_mnist, as class folders of image files that the
// `image_folder` source reads (tools/data/folder_writer.h).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::data_tool {

struct ConvertOptions {
  std::string source;                 // "fashion_mnist" (IDX files) or "image_folder"
  std::string path;                   // the source's directory
  std::string out;                    // created if missing; must hold no TFRecords (or split folders) yet
  std::string format = "tfrecord";    // "tfrecord" or "folder" (fashion_mnist only)
  int first_label = 0;                // tfrecord: the label stored for class 0 (1: ImageNet's 1-based labels)
  std::string image_format = "jpeg";  // "jpeg" or "png"; image_folder keeps its files' bytes
  int jpeg_quality = 95;              // 1..100
  int train_shards = 4;               // >= 1
  int validation_shards = 1;          // >= 1
};

struct ConvertReport {
  int64_t train_examples = 0;
  int64_t validation_examples = 0;
  int num_classes = 0;
  int64_t bytes_written = 0;
};

// Converts; errors name the file or the option that was wrong, and leave no
// partial shard behind under a final name (shards are written as *.tmp and
// renamed when complete).
absl::StatusOr<ConvertReport> Convert(const ConvertOptions& options);

}  // namespace pstrain::data_tool
