// ExampleDecoder: a dataset whose examples stay encoded (JPEG or PNG images
// in TFRecords or files) and are decoded when a batch needs them, so a set
// far larger than memory (ImageNet) can be trained on. A Dataset holding a
// decoder has no images or labels in memory (common/data/dataset.h).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

class ExampleDecoder {
 public:
  virtual ~ExampleDecoder() = default;

  virtual int64_t num_examples() const = 0;

  // Decodes example `index` (in [0, num_examples)) into `out`: the dataset's
  // example_shape, [C, H, W] floats. `train`: the training transform (random
  // crop and flip drawn from `seed` alone, so the result does not depend on
  // which thread decodes it); else the evaluation transform (`seed`
  // unused). Returns the example's label, in [0, num_classes). Errors name
  // the file and the byte offset of the bad example. Thread-safe.
  virtual absl::StatusOr<int32_t> Decode(int64_t index, uint64_t seed, bool train, float* out) const = 0;

  // Examples set aside as corrupt while indexing (data.skip_corrupt).
  virtual int64_t skipped() const { return 0; }

  // One line for logs: the files and transform.
  virtual std::string Describe() const = 0;
};

}  // namespace pstrain
