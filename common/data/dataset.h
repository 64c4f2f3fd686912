// Dataset: a labelled image set, either held in host memory (images and
// labels) or kept encoded and decoded batch by batch (decoder).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/data/example_decoder.h"
#include "common/tensor.h"

namespace pstrain {

struct Dataset {
  int64_t num_examples = 0;
  Shape example_shape;  // [C, H, W] of one example.
  int num_classes = 0;
  // num_examples * C * H * W floats, example-major then row-major ([N, C, H, W]).
  std::vector<float> images;
  // num_examples labels, each in [0, num_classes).
  std::vector<int32_t> labels;
  // Encoded datasets: decodes example i on demand; images and labels are
  // then empty, and num_examples is the decoder's.
  std::shared_ptr<const ExampleDecoder> decoder;
  // Noise with random labels (data.source synthetic): for throughput, with
  // nothing to learn, so no run on it is judged by its loss or accuracy.
  bool random_labels = false;
  // Encoded image sources: how an example is made from a stored image, and
  // why (ImageTransform::description), for the run's header; else empty.
  std::string preprocessing;

  // Sparse (categorical) features of click logs, for models with embedding
  // tables (model.tables, docs/EMBEDDINGS.md): per example, `sparse_features`
  // bags of `bag_size` ids each, example-major then feature-major
  // (num_examples * sparse_features * bag_size entries; example e's feature
  // f's bag starts at (e * sparse_features + f) * bag_size). Feature f is
  // looked up in table f. A bag's ids come first, kMissingId pads the rest;
  // a bag of no ids is a missing feature (it pools to zeros). Empty for
  // image datasets. `images` then holds the dense features ([N, 1, 1, dense
  // count], log1p applied) and `labels` the 0/1 clicks (num_classes 2).
  static constexpr uint64_t kMissingId = ~uint64_t{0};
  int sparse_features = 0;
  int bag_size = 1;
  std::vector<uint64_t> sparse_ids;
  // For synthetic click logs: the best test AUC any model can reach on the
  // test set (the generator's planted probabilities); NaN otherwise.
  double planted_auc = std::numeric_limits<double>::quiet_NaN();

  bool encoded() const { return decoder != nullptr; }
};

// Floats per example: the product of example_shape.
int64_t ExampleSize(const Dataset& data);

// OK when the sizes of images, labels and sparse_ids agree with
// num_examples, example_shape and sparse_features, and every label lies in
// [0, num_classes); otherwise
// INVALID_ARGUMENT saying what disagrees.
absl::Status ValidateDataset(const Dataset& data);

}  // namespace pstrain
