// Single-thread memcpy bandwidth: the yardstick the PS benchmark compares its
// goodput with (a transport can hardly beat one core copying memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace pstrain::bench {

struct MemcpyBandwidth {
  int64_t bytes = 0;     // bytes copied in the timed loop
  double seconds = 0;    // time the timed loop took
  double mean_gbps = 0;  // bytes * 8 / seconds / 1e9 over the whole loop
  // The best of the loop's ~10 equal time slices (each at least one copy),
  // bytes * 8 / seconds / 1e9: on a shared machine a slice where another
  // process took the core does not drag the yardstick down. This is the
  // figure the benchmarks compare with (the conservative choice for a ratio).
  double gbps = 0;
};

// Copies a `buffer_bytes` buffer (> 0) into a pre-faulted destination of the
// same size, repeatedly, on the calling thread, for about `seconds` (at least
// one copy per slice is timed; one untimed copy runs first).
MemcpyBandwidth MeasureMemcpyBandwidth(size_t buffer_bytes, double seconds);

}  // namespace pstrain::bench
