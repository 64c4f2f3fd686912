// ChunkTable: the device-memory table of chunks (tensor_chunks.h) behind one
// multi-tensor kernel launch of a CUDA optimizer. The variables' pointers do
// not change between steps, so the table is uploaded when it differs from
// the last one (the first step) and reused after that.
//
// Used by one thread at a time (the optimizer's, which owns the stream).
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "absl/types/span.h"
#include "optim/cuda/optimizer_kernels.h"
#include "optim/optimizer.h"

namespace pstrain::cuda {

class ChunkTable {
 public:
  // Elements per chunk: one thread block of 256 threads, 256 elements each.
  static constexpr int64_t kMaxChunk = 65536;

  ChunkTable() = default;
  ChunkTable(const ChunkTable&) = delete;
  ChunkTable& operator=(const ChunkTable&) = delete;
  ~ChunkTable();

  // The chunks of `variables` on the device, their slot `slot` as each
  // chunk's v (null when slot < 0), and how many there are. Valid until the
  // next call; work queued on `stream` after the call may read it.
  const DeviceChunk* Upload(absl::Span<const VariableUpdate> variables, int slot, cudaStream_t stream, int* count);

 private:
  std::vector<DeviceChunk> host_;  // what the device copy holds
  DeviceChunk* device_ = nullptr;
  size_t capacity_ = 0;  // chunks device_ has room for
};

}  // namespace pstrain::cuda
