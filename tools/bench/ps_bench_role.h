// A role of `pstrain-bench ps --processes` (ps_bench_processes.h): the bench
// starts itself as `pstrain-bench ps-role --role=server|worker --index=i
// --control=PATH` once per shard and worker. The role says hello on the
// control channel at PATH (ps_bench_control.h), gets its setup, and runs:
//   server  the shard's TcpSink, then RunParameterServer on its transport
//           until every worker is Done; sends its final stats.
//   worker  a BenchWorker (ps_bench_worker.h) on its own transport, meeting
//           the others through the bench; sends what it measured.
// A role that fails sends its error and exits 1; the bench names it.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/ps_bench.h"
#include "tools/bench/ps_bench_cluster.h"
#include "tools/bench/ps_bench_role.pb.h"

namespace pstrain::bench {

// The role's whole life; returns its exit code: 0, 1 (it failed, and said
// why on the channel and stderr), 2 (bad arguments).
int RunPsBenchRole(const std::string& role, int index, const std::string& control_path);

// What the bench tells every role.
RoleSetup MakeRoleSetup(const PsBenchOptions& options, const PsBenchSetup& setup);
// The options and security a role runs with.
PsBenchOptions OptionsOf(const RoleSetup& setup);

// A worker's measurements and worker 0's phase loads, both ways.
WorkerResult ToWorkerResult(const WorkerTally& tally, const ShardLoad (&loads)[kNumPhases][2]);
WorkerTally TallyOf(const WorkerResult& result);

}  // namespace pstrain::bench
