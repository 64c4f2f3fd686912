#include "optim/cuda/chunk_table.h"

#include "glog/logging.h"
#include "optim/tensor_chunks.h"

namespace pstrain::cuda {
namespace {

bool SameChunks(const std::vector<DeviceChunk>& a, const std::vector<DeviceChunk>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].w != b[i].w || a[i].g != b[i].g || a[i].v != b[i].v || a[i].n != b[i].n) return false;
  }
  return true;
}

void Check(cudaError_t err, const char* what) { CHECK(err == cudaSuccess) << what << ": " << cudaGetErrorString(err); }

}  // namespace

ChunkTable::~ChunkTable() {
  if (device_ != nullptr) cudaFree(device_);
}

const DeviceChunk* ChunkTable::Upload(absl::Span<const VariableUpdate> variables, int slot, cudaStream_t stream,
                                      int* count) {
  std::vector<int64_t> lengths;
  for (const VariableUpdate& v : variables) lengths.push_back(v.n);
  std::vector<DeviceChunk> table;
  for (const TensorChunk& c : ChunkTensors(lengths, kMaxChunk)) {
    const VariableUpdate& v = variables[c.tensor];
    table.push_back({v.value + c.offset, v.grad + c.offset, slot < 0 ? nullptr : v.slots[slot] + c.offset, c.length});
  }
  *count = static_cast<int>(table.size());
  if (SameChunks(table, host_)) return device_;
  // A new table (the first step): wait for the kernels that may still read
  // the old one, then replace it.
  Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  if (table.size() > capacity_) {
    if (device_ != nullptr) Check(cudaFree(device_), "cudaFree");
    Check(cudaMalloc(&device_, table.size() * sizeof(DeviceChunk)), "cudaMalloc");
    capacity_ = table.size();
  }
  if (!table.empty()) {
    Check(cudaMemcpy(device_, table.data(), table.size() * sizeof(DeviceChunk), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  host_ = std::move(table);
  return device_;
}

}  // namespace pstrain::cuda
