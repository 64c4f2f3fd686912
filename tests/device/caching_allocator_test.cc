// The caching allocator's bookkeeping, over a host backend that counts its
// calls (the same logic serves cudaMalloc and cudaHostAlloc on GPUs).
#include "device/caching_allocator.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// malloc/free with counts and a byte limit, shared with the allocator.
struct CountingHost {
  int64_t allocs = 0;
  int64_t frees = 0;
  size_t live_bytes = 0;
  size_t limit = SIZE_MAX;
  std::map<void*, size_t> live;

  CachingAllocator::Backend Backend() {
    return {"counting host",
            [this](size_t bytes) -> void* {
              if (live_bytes + bytes > limit) return nullptr;
              void* p = std::malloc(bytes);
              ++allocs;
              live_bytes += bytes;
              live[p] = bytes;
              return p;
            },
            [this](void* p) {
              ++frees;
              live_bytes -= live.at(p);
              live.erase(p);
              std::free(p);
            }};
  }
};

TEST(CachingAllocatorTest, SteadyStateStepsStopCallingTheBackend) {
  CountingHost host;
  CachingAllocator allocator(host.Backend());
  const std::vector<size_t> step_sizes = {4096, 100, 1 << 20, 3 * 512 + 1, 4096};
  for (int step = 0; step < 5; ++step) {
    std::vector<std::shared_ptr<Buffer>> live;
    for (size_t bytes : step_sizes) {
      live.push_back(allocator.Allocate(bytes));
      ASSERT_NE(live.back(), nullptr);
      EXPECT_GE(live.back()->size(), bytes);
    }
    if (step == 0) {
      EXPECT_EQ(host.allocs, 5);
    }
  }
  EXPECT_EQ(host.allocs, 5) << "steps after the first must be served from the cache";
  EXPECT_EQ(host.frees, 0);
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.requests, 25);
  EXPECT_EQ(s.cache_hits, 20);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_GT(s.bytes_cached, 0u);
}

TEST(CachingAllocatorTest, RoundsUpAndReusesOnlyBlocksOfSimilarSize) {
  CountingHost host;
  CachingAllocator allocator(host.Backend());
  void* big_block = nullptr;
  {
    auto big = allocator.Allocate(1 << 20);
    big_block = big->data();
    EXPECT_EQ(big->size(), size_t{1} << 20);
  }
  // A tiny request does not take the 1 MiB block (more than twice its size).
  auto tiny = allocator.Allocate(10);
  EXPECT_EQ(tiny->size(), CachingAllocator::kRoundBytes);
  EXPECT_NE(tiny->data(), big_block);
  EXPECT_EQ(host.allocs, 2);
  // A request a little smaller than the cached block reuses it.
  auto similar = allocator.Allocate((1 << 20) - 1000);
  EXPECT_EQ(similar->data(), big_block);
  EXPECT_EQ(host.allocs, 2);
}

TEST(CachingAllocatorTest, BackendFailureReleasesTheCacheAndRetries) {
  CountingHost host;
  host.limit = 3 * 4096;
  CachingAllocator allocator(host.Backend());
  { auto a = allocator.Allocate(4096), b = allocator.Allocate(4096); }  // both cached now
  EXPECT_EQ(host.live_bytes, 2 * 4096u);
  // 8 KiB + 8 KiB cached > limit: the cache is released, then the retry fits.
  auto c = allocator.Allocate(2 * 4096);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(host.frees, 2);
  EXPECT_EQ(allocator.stats().bytes_cached, 0u);
  // Nothing cached to release: the request fails with null.
  EXPECT_EQ(allocator.Allocate(3 * 4096), nullptr);
}

TEST(CachingAllocatorTest, BuffersMayOutliveTheAllocator) {
  CountingHost host;
  std::shared_ptr<Buffer> survivor;
  {
    CachingAllocator allocator(host.Backend());
    { auto cached = allocator.Allocate(512); }
    survivor = allocator.Allocate(100000);
  }
  EXPECT_EQ(host.frees, 1) << "the cached block is freed with the allocator";
  survivor.reset();
  EXPECT_EQ(host.frees, 2) << "a block returned after the allocator is gone goes to the backend";
  EXPECT_EQ(host.live_bytes, 0u);
}

TEST(CachingAllocatorTest, ConcurrentThreadsAccountEveryByte) {
  CountingHost host;
  std::mutex backend_mu;  // the counting backend itself is not thread-safe
  CachingAllocator::Backend raw = host.Backend();
  CachingAllocator allocator({"locked host",
                              [&](size_t n) {
                                std::lock_guard<std::mutex> l(backend_mu);
                                return raw.alloc(n);
                              },
                              [&](void* p) {
                                std::lock_guard<std::mutex> l(backend_mu);
                                raw.free(p);
                              }});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&allocator, t] {
      for (int i = 0; i < 200; ++i) {
        auto b = allocator.Allocate(512 * (1 + (i + t) % 7));
        static_cast<char*>(b->data())[0] = 1;
      }
    });
  }
  for (auto& th : threads) th.join();
  const CachingAllocator::Stats s = allocator.stats();
  EXPECT_EQ(s.requests, 800);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.cache_hits + s.backend_allocs, 800);
  EXPECT_LE(s.backend_allocs, 4 * 7) << "at most one block per size per thread in flight";
}

}  // namespace
}  // namespace pstrain
