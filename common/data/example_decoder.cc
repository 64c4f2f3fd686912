#include "common/data/example_decoder.h"

#include "glog/logging.h"

namespace pstrain {
namespace {

// Bad examples tried in a row before giving up even with skip_corrupt.
constexpr int kMaxSkipsInARow = 16;

}  // namespace

absl::StatusOr<int32_t> ExampleDecoder::Decode(int64_t index, uint64_t seed, bool train, float* out) const {
  absl::StatusOr<int32_t> label = DecodeOne(index, seed, train, out);
  for (int tries = 1; !label.ok() && skip_corrupt_ && tries <= kMaxSkipsInARow; ++tries) {
    if (skipped_.fetch_add(1) < 10) LOG(WARNING) << "skipping a bad example (data.skip_corrupt): " << label.status();
    label = DecodeOne((index + tries) % num_examples(), seed, train, out);
  }
  return label;
}

}  // namespace pstrain
