// The PS benchmark's cluster (ps_bench.h tells the benchmark), whatever runs
// it: what it is set up with (PsBenchSetup: the config the roles run with,
// the keys' placement, the reserved ports) and what a run of it measured
// (PsBenchRun). Today every shard and worker is a thread of this process
// (RunClusterInThreads, ps_bench_threads.h); another way of running them
// (separate processes, emulated hosts) is another function from a
// PsBenchSetup to a PsBenchRun, one step of RunPsBench.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/placement.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "tools/bench/heartbeat_probe.h"
#include "tools/bench/port_reservation.h"
#include "tools/bench/ps_bench.h"

namespace pstrain::bench {

// Generous: the bench must measure, not time out, even on a loaded machine.
inline constexpr double kPsBenchRpcSeconds = 600;
// How often a worker sends a heartbeat during a phase's timed rounds
// (heartbeat_probe.h), to time control traffic beside the bulk bytes.
inline constexpr absl::Duration kHeartbeatProbeInterval = absl::Milliseconds(100);
inline constexpr double kPsBenchStartupSeconds = 120;

// The three phases, in the order they run.
enum class Phase { kPush, kPull, kPushPull };
inline constexpr int kNumPhases = 3;
inline constexpr Phase kPhases[kNumPhases] = {Phase::kPush, Phase::kPull, Phase::kPushPull};
// The plain-TCP phases after them (ps_bench_tcp.h): the same bytes from each
// worker to the shards' sinks, one direction, then both directions at once.
enum class TcpPhase { kOneWay, kBothWays };
inline constexpr int kNumTcpPhases = 2;
inline constexpr TcpPhase kTcpPhases[kNumTcpPhases] = {TcpPhase::kOneWay, TcpPhase::kBothWays};

// On hosts of their own, shard s listens on port kHostBasePort + s of its
// host's address and its sink on kHostBasePort + servers + s.
inline constexpr int kHostBasePort = 2222;

struct PsBenchSetup {
  // Async, sgd, the shards on 127.0.0.1:<reserved port> (or their hosts'
  // addresses), generous timeouts, as many worker entries as workers (never
  // dialled).
  ExperimentConfig config;
  std::vector<VariablePart> plan;  // keys "key_0".. placed on the shards
  // Where each shard's TCP sink listens (as the shard: a reserved port, or
  // its host's address).
  std::vector<std::string> tcp_sinks;
  // One per shard and one per sink, on its port: release them once every
  // shard and sink is up.
  std::vector<std::unique_ptr<PortReservation>> reservations;
};

// Reserves a port of 127.0.0.1 per shard and per sink -- or, given the
// address of each shard's host (`shard_hosts`), uses the ports above -- and
// makes the config and the placement.
absl::StatusOr<PsBenchSetup> SetUpCluster(const PsBenchOptions& options,
                                          const std::vector<std::string>& shard_hosts = {});
// The placement of the keys "key_0".. over the shards of `config`: the same
// in every process that computes it.
absl::StatusOr<std::vector<VariablePart>> PlanKeys(const PsBenchOptions& options, const ExperimentConfig& config);

// Process-wide resource usage at one instant (getrusage).
struct UsageSnapshot {
  double user_seconds = 0;
  double sys_seconds = 0;
  int64_t minor_faults = 0;
  int64_t voluntary_switches = 0;
  int64_t involuntary_switches = 0;
};
UsageSnapshot TakeUsage();
// The same, summed over the processes `pids` (every thread of each), read
// from /proc; a process that is gone counts nothing.
UsageSnapshot TakeUsage(const std::vector<pid_t>& pids);

// One worker's timed part of one phase.
struct PhaseTiming {
  int64_t rounds = 0;
  double seconds = 0;
  double push_call_seconds = 0;  // inside PsClient::Push
  double pull_call_seconds = 0;  // inside PsClient::Pull
  // Heartbeats sent every kHeartbeatProbeInterval while the phase's timed
  // rounds ran, and their round trips (PsClient::Heartbeat, as training's
  // heartbeat thread sends them, beside the phase's bulk traffic).
  HeartbeatRoundTrips heartbeats;
};

// What one worker measured.
struct WorkerTally {
  PhaseTiming timing[kNumPhases];
  PhaseTiming tcp[kNumTcpPhases];  // rounds and seconds only
  int64_t push_calls = 0;          // all phases, warm-up included
  int64_t pull_calls = 0;          // the same, and the first pull that waits for Init
};

// The whole cluster over one phase's timed part: at its start and at its end.
struct PhaseSpan {
  bool has_usage = false;  // the process's usage was taken
  UsageSnapshot usage[2];
  ShardLoad load[2];  // summed over shards (zero when Stats failed: diagnostics only)
};

struct PsBenchRun {
  std::vector<WorkerTally> workers;        // in worker order
  PhaseSpan phases[kNumPhases];            // in kPhases order
  std::vector<StatsResponse> final_stats;  // what each shard reported when it returned
};

}  // namespace pstrain::bench
