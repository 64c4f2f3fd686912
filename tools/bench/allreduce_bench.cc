#include "tools/bench/allreduce_bench.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

// Keeps the compiler from eliding copies whose result is never read.
inline void Clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Best-of-slices single-thread memcpy GB/s over a `bytes` buffer.
double MemcpyGbps(size_t bytes, double seconds) {
  constexpr int kSlices = 10;
  std::unique_ptr<char[]> src(new char[bytes]);
  std::unique_ptr<char[]> dst(new char[bytes]);
  std::memset(src.get(), 0x5a, bytes);
  std::memset(dst.get(), 0, bytes);
  std::memcpy(dst.get(), src.get(), bytes);  // warm-up
  Clobber(dst.get());
  using Clock = std::chrono::steady_clock;
  const auto slice = std::chrono::duration<double>(seconds / kSlices);
  double best = 0;
  auto now = Clock::now();
  for (int s = 0; s < kSlices; ++s) {
    const auto slice_start = now;
    int64_t copies = 0;
    do {
      std::memcpy(dst.get(), src.get(), bytes);
      Clobber(dst.get());
      ++copies;
      now = Clock::now();
    } while (now < slice_start + slice);
    const double secs = std::chrono::duration<double>(now - slice_start).count();
    if (secs > 0) best = std::max(best, static_cast<double>(copies) * bytes / secs / 1e9);
  }
  return best;
}

}  // namespace

absl::StatusOr<AllReduceBenchResult> RunAllReduceBench(int ranks, int64_t bytes, int iterations) {
  if (ranks < 1) return absl::InvalidArgumentError(absl::StrCat("allreduce bench: ranks ", ranks, " < 1"));
  if (bytes <= 0 || bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("allreduce bench: bytes ", bytes, " must be > 0 and a multiple of 4 (float32)"));
  }
  if (iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("allreduce bench: iterations ", iterations, " < 1"));
  }
  AllReduceBenchResult result;
  result.ranks = ranks;
  result.bytes = bytes;
  result.iterations = iterations;
  result.memcpy_buffer_bytes = std::max<int64_t>(bytes, int64_t{64} << 20);
  result.memcpy_gbps = MemcpyGbps(static_cast<size_t>(result.memcpy_buffer_bytes), 0.3);

  const size_t count = static_cast<size_t>(bytes / 4);
  InMemoryKeyValueStore store;
  std::vector<absl::Status> status(ranks);
  std::vector<double> seconds(ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      CollectiveOptions options;
      options.rank = r;
      options.size = ranks;
      options.host = "127.0.0.1";
      options.store = &store;
      options.prefix = "allreduce_bench";
      options.timeout = absl::Seconds(120);
      options.connect_timeout = absl::Seconds(60);
      absl::StatusOr<std::unique_ptr<Collective>> collective = CreateGlooCollective(options);
      if (!collective.ok()) {
        status[r] = collective.status();
        return;
      }
      // Values stay finite for many calls (they grow by `ranks` per call and
      // saturate at inf, which costs the same; never denormal).
      std::vector<float> data(count, 1.0f);
      auto fail = [&](absl::Status s) { status[r] = std::move(s); };
      for (int i = 0; i < 2; ++i) {
        if (absl::Status s = (*collective)->AllReduceSum(data.data(), count); !s.ok()) return fail(s);
      }
      if (absl::Status s = (*collective)->Barrier(); !s.ok()) return fail(s);
      const absl::Time start = absl::Now();
      for (int i = 0; i < iterations; ++i) {
        if (absl::Status s = (*collective)->AllReduceSum(data.data(), count); !s.ok()) return fail(s);
      }
      seconds[r] = absl::ToDoubleSeconds(absl::Now() - start);
      // Nobody tears down its connections while a peer still finishes.
      if (absl::Status s = (*collective)->Barrier(); !s.ok()) return fail(s);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  result.seconds = *std::max_element(seconds.begin(), seconds.end());
  result.seconds_per_call = result.seconds / iterations;
  if (result.seconds_per_call > 0) {
    result.algbw_gbps = static_cast<double>(bytes) / result.seconds_per_call / 1e9;
    result.busbw_gbps = result.algbw_gbps * 2.0 * (ranks - 1) / ranks;
  }
  if (result.memcpy_gbps > 0) result.busbw_to_memcpy = result.busbw_gbps / result.memcpy_gbps;
  return result;
}

}  // namespace pstrain
