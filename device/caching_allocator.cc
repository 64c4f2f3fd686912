#include "device/caching_allocator.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace pstrain {

struct CachingAllocator::Pool {
  explicit Pool(Backend b) : backend(std::move(b)) {}
  ~Pool() {
    for (auto& [size, block] : free_blocks) backend.free(block);
  }

  const Backend backend;
  mutable absl::Mutex mu;
  std::multimap<size_t, void*> free_blocks ABSL_GUARDED_BY(mu);  // by rounded size
  Stats stats ABSL_GUARDED_BY(mu);
  // Set when the allocator object is destroyed: blocks coming back are then
  // freed at once rather than cached.
  bool closing ABSL_GUARDED_BY(mu) = false;

  void ReleaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (auto& [size, block] : free_blocks) {
      backend.free(block);
      ++stats.backend_frees;
    }
    free_blocks.clear();
    stats.bytes_cached = 0;
  }

  void Return(void* block, size_t size) {
    absl::MutexLock lock(&mu);
    stats.bytes_in_use -= size;
    if (closing) {
      backend.free(block);
      ++stats.backend_frees;
      return;
    }
    free_blocks.emplace(size, block);
    stats.bytes_cached += size;
  }
};

CachingAllocator::CachingAllocator(Backend backend) : pool_(std::make_shared<Pool>(std::move(backend))) {
  CHECK(pool_->backend.alloc && pool_->backend.free) << "CachingAllocator needs alloc and free";
}

CachingAllocator::~CachingAllocator() {
  absl::MutexLock lock(&pool_->mu);
  pool_->ReleaseLocked();
  pool_->closing = true;
}

std::shared_ptr<Buffer> CachingAllocator::Allocate(size_t bytes) {
  const size_t rounded = std::max<size_t>(1, (bytes + kRoundBytes - 1) / kRoundBytes) * kRoundBytes;
  void* block = nullptr;
  size_t size = rounded;
  {
    absl::MutexLock lock(&pool_->mu);
    ++pool_->stats.requests;
    auto it = pool_->free_blocks.lower_bound(rounded);
    if (it != pool_->free_blocks.end() && it->first <= 2 * rounded) {
      size = it->first;
      block = it->second;
      pool_->free_blocks.erase(it);
      pool_->stats.bytes_cached -= size;
      ++pool_->stats.cache_hits;
    }
  }
  if (block == nullptr) {
    block = pool_->backend.alloc(rounded);
    if (block == nullptr) {
      absl::MutexLock lock(&pool_->mu);
      pool_->ReleaseLocked();
      block = pool_->backend.alloc(rounded);
    }
    if (block == nullptr) return nullptr;
    absl::MutexLock lock(&pool_->mu);
    ++pool_->stats.backend_allocs;
  }
  {
    absl::MutexLock lock(&pool_->mu);
    pool_->stats.bytes_in_use += size;
    pool_->stats.peak_bytes_in_use = std::max(pool_->stats.peak_bytes_in_use, pool_->stats.bytes_in_use);
  }
  // The owner returns the block to the pool; it holds the pool alive.
  std::shared_ptr<void> owner(block, [pool = pool_, size](void* p) { pool->Return(p, size); });
  return Buffer::Borrow(block, size, std::move(owner));
}

CachingAllocator::Stats CachingAllocator::stats() const {
  absl::MutexLock lock(&pool_->mu);
  return pool_->stats;
}

const std::string& CachingAllocator::name() const { return pool_->backend.name; }

}  // namespace pstrain
