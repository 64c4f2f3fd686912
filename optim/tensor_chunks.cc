#include "optim/tensor_chunks.h"

#include <algorithm>

#include "glog/logging.h"

namespace pstrain {

std::vector<TensorChunk> ChunkTensors(absl::Span<const int64_t> lengths, int64_t max_chunk) {
  CHECK_GT(max_chunk, 0);
  std::vector<TensorChunk> chunks;
  for (size_t t = 0; t < lengths.size(); ++t) {
    CHECK_GE(lengths[t], 0) << "tensor " << t;
    for (int64_t offset = 0; offset < lengths[t]; offset += max_chunk) {
      chunks.push_back({static_cast<int32_t>(t), offset, std::min(max_chunk, lengths[t] - offset)});
    }
  }
  return chunks;
}

}  // namespace pstrain
