// Writes one split of a dataset as TFRecord shards named as TensorFlow's
// ImageNet scripts name them: <split>-00000-of-00004, ... Each shard is
// written as <name>.tmp and renamed once complete, so no partial shard ever
// carries a final name.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "common/data/records/image_example.h"

namespace pstrain::data_tool {

struct SplitSource {
  std::string name;  // "train" or "validation"
  int64_t size = 0;
  // Example i (0 <= i < size); examples are dealt to shards round-robin.
  std::function<absl::StatusOr<data::ImageExample>(int64_t)> example;
};

// Returns the bytes written.
absl::StatusOr<int64_t> WriteShards(const SplitSource& split, int shards, const std::string& out);

}  // namespace pstrain::data_tool
