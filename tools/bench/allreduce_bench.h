// The all-reduce micro-benchmark behind `pstrain-bench allreduce`.
//
// Two paths are timed on every rank, over the same bytes:
//   reference  the library's own all-reduce of one buffer: Gloo's ring
//              (through the gloo Collective) or a plain MPI_Allreduce
//   strategy   what the allreduce strategy runs in training: a
//              FusedAllReducer (worker/fused_allreduce.h) with its
//              communication thread and fusion buckets, over `variables`
//              gradients that together hold `bytes` and lie adjacent in one
//              buffer, as a model's gradients do; every gradient is announced
//              ready in backward order, then the step is finished
// Each path: two untimed warm-up calls, a barrier, then `iterations` timed
// calls; the time per call is the slowest rank's. Figures follow nccl-tests
// and count the float32 bytes reduced (with --compression fp16/bf16 half as
// many travel in the strategy path):
//   algbw = bytes / time per call
//   busbw = algbw * 2 (ranks - 1) / ranks  (the bytes each rank's link moves
//           in a ring all-reduce, per unit time; comparable across rank counts)
// in GB/s (1e9 bytes/s, hence *_gbytes_per_sec; the benchmarks keep *_gbps
// for Gbit/s). Beside them, single-thread memcpy bandwidth
// (memcpy_bandwidth.h, over a max(bytes, 64 MiB) buffer) in GB/s, the yardstick
// of busbw_to_memcpy, and strategy_to_reference, the share of the library's
// speed the strategy's path keeps.
//
// Backends: "gloo" runs the ranks as threads of this process, each with its
// own TCP device on 127.0.0.1 (every byte crosses the loopback TCP stack, as
// it would cross the network between workers), meeting through an in-memory
// store. "mpi" runs them as the ranks of one mpirun (processes; Open MPI's
// shared memory between them on one host): RunMpiAllReduceRank is what each
// rank runs; `pstrain-bench allreduce --backend mpi` starts mpirun itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "worker/collective/collective.h"

namespace pstrain {

struct AllReduceBenchOptions {
  std::string backend = "gloo";  // gloo | mpi
  int ranks = 2;
  int64_t bytes = 4 << 20;  // per rank, per call; a multiple of 4 * variables
  int iterations = 20;      // timed calls per rank and path
  int variables = 16;       // strategy path: gradients the bytes are split into
  int64_t fusion_threshold_bytes = 64 << 20;
  // The strategy path's wire: "none" (float32), "fp16" or "bf16" (16-bit
  // buffers summed in 16 bits, as `compression` does in training; the
  // reference stays the library's float32 all-reduce of the same elements).
  std::string compression = "none";
};

// InvalidArgument naming the first bad option.
absl::Status ValidateAllReduceBenchOptions(const AllReduceBenchOptions& options);

struct AllReducePathFigures {
  double seconds_per_call = 0;  // slowest rank
  double algbw_gbytes_per_sec = 0;
  double busbw_gbytes_per_sec = 0;
  double busbw_to_memcpy = 0;
};

struct AllReduceBenchResult {
  AllReduceBenchOptions options;
  AllReducePathFigures reference;
  AllReducePathFigures strategy;
  double strategy_to_reference = 0;  // strategy busbw / reference busbw
  int fusion_buckets = 0;            // of the strategy path
  int buckets_in_place = 0;
  double memcpy_gbytes_per_sec = 0;  // single-thread memcpy, best slice
  int64_t memcpy_buffer_bytes = 0;
};

// Building blocks of both backends.
//
// One rank's timed loops: `reference` all-reduces `count` floats in place with
// the library's own call; the strategy path runs a FusedAllReducer over
// `collective`. Every rank of the communicator must call it together.
struct RankSeconds {
  double reference = 0;  // the timed loop of each path on this rank
  double strategy = 0;
  int fusion_buckets = 0;
  int buckets_in_place = 0;
};
absl::StatusOr<RankSeconds> TimeRank(Collective* collective,
                                     const std::function<absl::Status(float* data, size_t count)>& reference,
                                     const AllReduceBenchOptions& options);
// The result from the slowest rank's loops (`slowest`) and memcpy.
AllReduceBenchResult MakeResult(const AllReduceBenchOptions& options, const RankSeconds& slowest,
                                double memcpy_gbytes_per_sec, int64_t memcpy_buffer_bytes);

// backend gloo: every rank a thread of this process. Measures memcpy too.
absl::StatusOr<AllReduceBenchResult> RunGlooAllReduceBench(const AllReduceBenchOptions& options);

// backend mpi, in each rank of an mpirun of options.ranks ranks: both paths
// (no memcpy: the caller measures it outside the job, where the ranks do not
// compete for the cores). Every rank returns the same figures.
// FailedPrecondition when not started by mpirun or built without MPI.
absl::StatusOr<AllReduceBenchResult> RunMpiAllReduceRank(const AllReduceBenchOptions& options);

// One JSON object with every figure (the --json output): the options, then
// fusion_buckets, buckets_in_place, "reference" and "strategy" (each
// seconds_per_call, algbw_gbytes_per_sec, busbw_gbytes_per_sec,
// busbw_to_memcpy), strategy_to_reference, memcpy_gbytes_per_sec,
// memcpy_buffer_bytes.
std::string FormatAllReduceBenchJson(const AllReduceBenchResult& r);
// The human-readable table.
std::string FormatAllReduceBenchTable(const AllReduceBenchResult& r);

}  // namespace pstrain
