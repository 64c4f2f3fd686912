// CachingAllocator: reuses freed blocks so a training loop that allocates the
// same sizes every step stops calling the backend (cudaMalloc, cudaHostAlloc)
// after its first step.
//
// Contract:
//   * Allocate(bytes) returns a Buffer of at least `bytes`; when the last
//     copy of that shared_ptr goes, the block returns to this allocator's
//     cache (not to the backend). Buffers may outlive the allocator object:
//     the cache is shared with them and freed when both are gone.
//   * Sizes are rounded up to kRoundBytes; a request is served by the
//     smallest cached block that fits and is at most twice its rounded size,
//     otherwise by the backend. When the backend fails, every cached block is
//     released to it and the request retried once; a second failure returns
//     null.
//   * Stream ordering is the caller's business: with one stream per device
//     (how pstrain uses it) a block freed by host code and handed out again
//     is only touched by work queued after everything that used it before.
//   * Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/tensor.h"

namespace pstrain {

class CachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;

  // How raw blocks are obtained and returned. alloc returns null on failure.
  struct Backend {
    std::string name;  // for messages, e.g. "cudaMalloc on gpu:0"
    std::function<void*(size_t bytes)> alloc;
    std::function<void(void* block)> free;
  };

  struct Stats {
    int64_t backend_allocs = 0;  // calls to Backend::alloc that succeeded
    int64_t backend_frees = 0;
    int64_t cache_hits = 0;  // requests served from the cache
    int64_t requests = 0;
    size_t bytes_in_use = 0;  // handed out now (rounded sizes)
    size_t bytes_cached = 0;  // free in the cache
    size_t peak_bytes_in_use = 0;
  };

  explicit CachingAllocator(Backend backend);
  // Frees the cached blocks; blocks still handed out are freed when returned.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Null when the backend cannot provide the block even after the cache was
  // emptied. Zero bytes gives a valid buffer of kRoundBytes.
  std::shared_ptr<Buffer> Allocate(size_t bytes);
  Stats stats() const;
  const std::string& name() const;

 private:
  struct Pool;
  std::shared_ptr<Pool> pool_;
};

}  // namespace pstrain
