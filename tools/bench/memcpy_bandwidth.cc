#include "tools/bench/memcpy_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

namespace pstrain::bench {
namespace {

// Keeps the compiler from eliding copies whose result is never read.
inline void Clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

constexpr int kSlices = 10;

}  // namespace

MemcpyBandwidth MeasureMemcpyBandwidth(size_t buffer_bytes, double seconds) {
  if (buffer_bytes == 0) buffer_bytes = 1;
  std::unique_ptr<char[]> src(new char[buffer_bytes]);
  std::unique_ptr<char[]> dst(new char[buffer_bytes]);
  // Fault every page of both buffers in before timing.
  std::memset(src.get(), 0x5a, buffer_bytes);
  std::memset(dst.get(), 0, buffer_bytes);
  std::memcpy(dst.get(), src.get(), buffer_bytes);  // warm-up
  Clobber(dst.get());

  using Clock = std::chrono::steady_clock;
  const auto slice = std::chrono::duration<double>(seconds / kSlices);
  MemcpyBandwidth result;
  const auto start = Clock::now();
  auto now = start;
  for (int s = 0; s < kSlices; ++s) {
    const auto slice_start = now;
    const auto until = slice_start + slice;
    int64_t copies = 0;
    do {
      std::memcpy(dst.get(), src.get(), buffer_bytes);
      Clobber(dst.get());
      ++copies;
      now = Clock::now();
    } while (now < until);
    const int64_t bytes = copies * static_cast<int64_t>(buffer_bytes);
    const double secs = std::chrono::duration<double>(now - slice_start).count();
    result.bytes += bytes;
    if (secs > 0) result.gbps = std::max(result.gbps, static_cast<double>(bytes) * 8 / secs / 1e9);
  }
  result.seconds = std::chrono::duration<double>(now - start).count();
  result.mean_gbps = result.seconds > 0 ? static_cast<double>(result.bytes) * 8 / result.seconds / 1e9 : 0;
  return result;
}

}  // namespace pstrain::bench
