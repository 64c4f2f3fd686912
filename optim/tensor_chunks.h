// TensorChunks: how one launch updates many variables (the multi-tensor
// apply of PyTorch's foreach/fused optimizers and of Apex): every variable
// is cut into chunks of at most `max_chunk` elements, and a GPU kernel runs
// one thread block per chunk over a table of them, so a model of hundreds of
// variables is updated by one kernel instead of one per variable.
//
// Contract of ChunkTensors: the chunks cover every element of every tensor
// exactly once, in tensor order and, within a tensor, in offset order; each
// has 1..max_chunk elements; tensors of length 0 have none.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace pstrain {

struct TensorChunk {
  int32_t tensor = 0;  // index into the lengths given
  int64_t offset = 0;  // first element of the chunk within its tensor
  int64_t length = 0;  // 1..max_chunk

  bool operator==(const TensorChunk&) const = default;
};

// The chunks of tensors of `lengths` (each >= 0); max_chunk > 0.
std::vector<TensorChunk> ChunkTensors(absl::Span<const int64_t> lengths, int64_t max_chunk);

}  // namespace pstrain
