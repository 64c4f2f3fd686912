// The PS benchmark's cluster as threads of this process: `servers` shards
// (RunParameterServer, one thread and one transport each, listening on their
// reserved ports) and `workers` worker threads (each a BenchWorker,
// ps_bench_worker.h, meeting the others at one barrier), each with its own PsClient
// over its own transport (so with "grpc" every byte crosses real gRPC on
// loopback; "inproc" is one InprocTransport every role shares). Worker 0
// Inits; every worker waits for it with its first pull. The workers run the
// phases in step, a barrier between them:
//   cluster up | per phase: warm-up rounds | timed rounds | loads taken
// Worker 0 takes the shards' summed loads (Stats) at both ends of each
// timed part while the others wait, and the barrier's completion takes the
// process's usage. Then the plain-TCP phases, each worker to every shard's
// TcpSink (a thread of this process on its reserved port, ps_bench_tcp.h).
// At the end every worker says Done and the shards return.
#pragma once

#include "absl/status/statusor.h"
#include "tools/bench/ps_bench.h"
#include "tools/bench/ps_bench_cluster.h"

namespace pstrain::bench {

// Runs the cluster of `setup` (whose port reservations are released once
// every worker has connected) to the end. The first error: a transport that
// cannot be created (nothing started, or the shards released), a worker's
// ("worker <i>: ..."; the shards are cancelled, as it may not have said
// Done), or a shard's ("PS shard <s>: ...").
absl::StatusOr<PsBenchRun> RunClusterInThreads(const PsBenchOptions& options, PsBenchSetup& setup);

}  // namespace pstrain::bench
