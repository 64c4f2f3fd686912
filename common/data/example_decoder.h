// ExampleDecoder: a dataset whose examples stay encoded (JPEG or PNG images
// in TFRecords or files) and are decoded when a batch needs them, so a set
// far larger than memory (ImageNet) can be trained on. A Dataset holding a
// decoder has no images or labels in memory (common/data/dataset.h).
// Implementations decode one example (DecodeOne); the base class replaces a
// bad one when the source sets bad examples aside (data.skip_corrupt).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

class ExampleDecoder {
 public:
  // `skip_corrupt`: Decode replaces an example that fails to decode by the
  // next one that does (at most 16 tries), counting each in skipped() and
  // logging the first ten, instead of returning its error.
  explicit ExampleDecoder(bool skip_corrupt) : skip_corrupt_(skip_corrupt) {}
  virtual ~ExampleDecoder() = default;

  virtual int64_t num_examples() const = 0;

  // Decodes example `index` (in [0, num_examples)) into `out`: the dataset's
  // example_shape, [C, H, W] floats. `train`: the training transform (random
  // crop and flip drawn from `seed` alone, so the result does not depend on
  // which thread decodes it); else the evaluation transform (`seed`
  // unused). Returns the example's label, in [0, num_classes). Errors name
  // the file (and the byte offset) of the bad example. Thread-safe.
  absl::StatusOr<int32_t> Decode(int64_t index, uint64_t seed, bool train, float* out) const;

  // Examples set aside as corrupt so far (data.skip_corrupt).
  int64_t skipped() const { return skipped_.load(); }

  // One line for logs: the files and transform.
  virtual std::string Describe() const = 0;

 protected:
  // Example `index` alone, as Decode describes it. Thread-safe.
  virtual absl::StatusOr<int32_t> DecodeOne(int64_t index, uint64_t seed, bool train, float* out) const = 0;

 private:
  const bool skip_corrupt_;
  mutable std::atomic<int64_t> skipped_{0};
};

}  // namespace pstrain
