// UploadStaging: host-to-device copies from pageable memory that do not
// wait for the stream.
//
// cudaMemcpyAsync from pageable (not page-locked) host memory stages the
// bytes through the driver's pinned buffers and, in practice, returns only
// once the copy is done, which in stream order means once everything queued
// before it is done: a model's per-step image upload then stalls the host
// until the previous step has finished on the GPU, and the GPU idles while
// the host queues the next step's first kernels. UploadStaging copies the
// bytes into pinned buffers of its own (two, used in turn) and queues an
// asynchronous copy from there, so the upload returns as soon as the host
// copy is made, and the source may be reused at once.
//
// A staging buffer is written again only after the copy out of it two
// uploads ago has completed (an event per buffer), so a third upload waits
// for the first one's copy, not for the stream's other work. Used by one
// thread at a time, like its CudaContext.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <memory>

#include "device/caching_allocator.h"

namespace pstrain::cuda {

// Whether `ptr` is host memory CUDA does not know as page-locked.
bool IsPageableHostMemory(const void* ptr);

class UploadStaging {
 public:
  // Buffers come from `pinned` (the context's pinned allocator), which must
  // outlive this object.
  explicit UploadStaging(CachingAllocator* pinned) : pinned_(pinned) {}
  ~UploadStaging();
  UploadStaging(const UploadStaging&) = delete;
  UploadStaging& operator=(const UploadStaging&) = delete;

  // Copies `bytes` from host memory `src` to device memory `dst`, queued on
  // `stream` after its earlier work; `src` may change once this returns.
  void Upload(const void* src, void* dst, size_t bytes, cudaStream_t stream);

 private:
  struct Slot {
    std::shared_ptr<Buffer> buffer;
    cudaEvent_t copied = nullptr;  // recorded after the last copy out of buffer
  };
  CachingAllocator* const pinned_;
  Slot slots_[2];
  int next_ = 0;
};

}  // namespace pstrain::cuda
