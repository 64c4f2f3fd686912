// Dataset: a labelled image set, either held in host memory (images and
// labels) or kept encoded and decoded batch by batch (decoder).
#pragma once

#include <cstdint>
#include <memory>
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

  bool encoded() const { return decoder != nullptr; }
};

// Floats per example: the product of example_shape.
int64_t ExampleSize(const Dataset& data);

// OK when the sizes of images and labels agree with num_examples and
// example_shape, and every label lies in [0, num_classes); otherwise
// INVALID_ARGUMENT saying what disagrees.
absl::Status ValidateDataset(const Dataset& data);

}  // namespace pstrain
