#include "device/cuda/upload_staging.h"

#include <cstring>

#include "device/cuda/cuda_check.h"
#include "glog/logging.h"

namespace pstrain::cuda {

bool IsPageableHostMemory(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    cudaGetLastError();  // not a pointer CUDA knows: plain host memory
    return true;
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

UploadStaging::~UploadStaging() {
  for (Slot& slot : slots_) {
    if (slot.copied == nullptr) continue;
    cudaEventSynchronize(slot.copied);  // the buffer goes back to the cache only once read
    cudaEventDestroy(slot.copied);
  }
}

void UploadStaging::Upload(const void* src, void* dst, size_t bytes, cudaStream_t stream) {
  Slot& slot = slots_[next_];
  next_ = 1 - next_;
  if (slot.copied == nullptr) {
    PSTRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&slot.copied, cudaEventDisableTiming));
  } else {
    PSTRAIN_CUDA_CHECK(cudaEventSynchronize(slot.copied));
  }
  if (slot.buffer == nullptr || slot.buffer->size() < bytes) {
    slot.buffer.reset();  // back to the cache first, so it can be reused
    slot.buffer = pinned_->Allocate(bytes);
    CHECK(slot.buffer != nullptr) << "cudaHostAlloc of " << bytes << " bytes of upload staging failed";
  }
  std::memcpy(slot.buffer->data(), src, bytes);
  PSTRAIN_CUDA_CHECK(cudaMemcpyAsync(dst, slot.buffer->data(), bytes, cudaMemcpyHostToDevice, stream));
  PSTRAIN_CUDA_CHECK(cudaEventRecord(slot.copied, stream));
}

}  // namespace pstrain::cuda
