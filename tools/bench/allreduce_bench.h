// The all-reduce micro-benchmark behind `pstrain-bench allreduce`.
//
// Runs `ranks` Gloo ranks as threads of this process, each with its own TCP
// device on 127.0.0.1 (so every byte crosses the loopback TCP stack, as it
// would cross the network between workers), rendezvous through an in-memory
// KeyValueStore. Each rank all-reduces (sum) a buffer of `bytes` bytes of
// float32: two untimed warm-up calls, a barrier, then `iterations` timed
// calls. Figures follow nccl-tests:
//   algbw = bytes / time per call
//   busbw = algbw * 2 (ranks - 1) / ranks  (the bytes each rank's link moves
//           in a ring all-reduce, per unit time; comparable across rank counts)
// all in GB/s (1e9 bytes/s), time per call from the slowest rank. Beside it,
// single-thread memcpy bandwidth over a max(bytes, 64 MiB) buffer (as
// `pstrain-bench ps` does, so a small buffer's cache does not flatter it; the
// best of ~10 time slices over ~0.3 s, measured before the ranks start) in
// GB/s, the yardstick for busbw_to_memcpy. (pstrain-bench ps reports Gbit/s.)
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace pstrain {

struct AllReduceBenchResult {
  int ranks = 0;
  int64_t bytes = 0;   // per rank, per call
  int iterations = 0;  // timed calls per rank
  double seconds = 0;  // timed loop of the slowest rank
  double seconds_per_call = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double memcpy_gbps = 0;
  int64_t memcpy_buffer_bytes = 0;
  double busbw_to_memcpy = 0;  // busbw_gbps / memcpy_gbps
};

// ranks >= 1; bytes > 0 and a multiple of 4; iterations >= 1.
absl::StatusOr<AllReduceBenchResult> RunAllReduceBench(int ranks, int64_t bytes, int iterations);

}  // namespace pstrain
