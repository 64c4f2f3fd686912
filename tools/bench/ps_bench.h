// The PS micro-benchmark behind `pstrain-bench ps`.
//
// Runs a real local cluster, by default inside this process: `servers` PS shards
// (RunParameterServer, one thread and one transport each, listening on
// 127.0.0.1:<free port>) and `workers` worker threads, each with its own
// PsClient over its own transport (so with "grpc" every byte crosses real gRPC
// on loopback). The experiment is async (pushes apply on arrival; nobody waits
// for anybody), optimizer sgd, `keys` float32 variables "key_0".. of
// `key_bytes` bytes each, placed round_robin. Worker 0 Inits.
// With `processes` every shard and worker is a process of its own instead
// (ps_bench_processes.h), on 127.0.0.1 -- or, with `emulated_hosts`, on
// emulated hosts (network namespaces on a bridge, links optionally capped):
// shards on the first hosts, workers on the others, so every byte crosses
// a link.
// (ps_bench_cluster.h: the cluster's setup and measurements, whatever runs
// it; ps_bench_threads.h: running it as threads of this process.)
//
// Three phases, every worker in step (a barrier between phases), each after
// `warmup_rounds` untimed rounds:
//   push       rounds of PsClient::Push (all keys)
//   pull       rounds of PsClient::Pull(min_version 0) (all keys)
//   push+pull  rounds of Push then Pull
// Each phase runs `rounds` rounds per worker, or for about `seconds` when
// rounds is 0. Goodput of a phase = sum over workers of
// keys*key_bytes*rounds*8 / that worker's seconds / 1e9 -- in push+pull each
// key's bytes count once per round although they cross the wire twice.
//
// Then the same bytes over plain TCP between the same endpoints
// (ps_bench_tcp.h: a sink where each shard is, a source where each worker
// is), phases timed like the others:
//   tcp one way    per round each worker sends each shard's bytes to its sink
//                  (8-byte ack back)
//   tcp both ways  the same, and each sink sends as many bytes back at once
// Goodput counted as for push+pull: the round's keys*key_bytes once per
// round, so pushpull_to_tcp = push+pull / tcp both ways compares two ways
// of moving the same bytes there and back (a worker's push then pull cannot
// overlap, so one worker stays below 1).
//
// Beside it, single-thread memcpy bandwidth over max(keys*key_bytes, 64 MiB)
// (measured before the cluster starts for memcpy_seconds; the best of its
// time slices, so a preempted slice on a shared machine does not flatter the
// ratio) and ratio = pushpull / memcpy.
// At the end every worker says Done, the shards return, everything joins.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport/security.h"
#include "proto/ps.pb.h"

namespace pstrain::bench {

struct PsBenchOptions {
  int workers = 1;              // >= 1
  int servers = 1;              // >= 1
  int64_t key_bytes = 1 << 20;  // > 0, a multiple of 4
  int keys = 8;                 // >= 1
  // A registered transport (common/transport/transport.h: "grpc", and "ucx"
  // in UCX builds), or "inproc", which is never registered (configs refuse
  // it): the bench makes one InprocTransport that every shard and worker
  // shares, a baseline without any network stack.
  std::string transport = "grpc";
  double seconds = 2.0;         // per phase when rounds == 0; > 0
  int64_t rounds = 0;           // per worker per phase; 0: run for `seconds`
  int64_t warmup_rounds = 2;    // per worker before each phase; >= 0
  double memcpy_seconds = 0.5;  // > 0
  std::string placement = "round_robin";
  // The push+pull phase's bytes of pushes in flight per worker
  // (ps_bench_pushpull.h; ps_scheduling.window_bytes in training); 0: no
  // limit. >= 0. Default: training's, 0.
  int64_t window_bytes = 0;
  // The push+pull phase's pushes in flight per shard (as
  // ps_scheduling.pushes_per_shard); 0: no limit. >= 0. Default: training's,
  // 1 (docs/BENCHMARKS.md, "Pushes per shard").
  int pushes_per_shard = 1;
  // TLS and the token every shard and worker uses (--security_config: the
  // `security` section of an experiment config); nothing enabled: plaintext.
  TransportSecurity security;
  // Every shard and worker in a process of its own (ps_bench_processes.h);
  // not with "inproc".
  bool processes = false;
  // With processes: 0 (every role on 127.0.0.1), or the roles spread over
  // this many emulated hosts (>= 2, at most servers + workers; root only):
  // shards round-robin on the first max(1, min(N - 1, round(N * servers /
  // (servers + workers)))) hosts, workers round-robin on the rest.
  int emulated_hosts = 0;
  // With emulated_hosts: every host's link capped at this many Gbit/s each
  // way (EmulatedHosts::LimitLink); 0: uncapped.
  double link_gbps = 0;
  // With emulated_hosts, where each host's processes run (tools/launch/
  // host_cpus.h): "own" (the CPUs this process may use split into disjoint
  // runs, one per host; an error with fewer CPUs than hosts), "shared"
  // (every host on all of them), or "auto" (own where there are enough
  // CPUs, else shared).
  std::string host_cpus = "auto";
  // With processes: the read end of a non-blocking pipe (or -1); a signal
  // number written to it stops the run as that signal would stop
  // pstrain-launch: the roles stopped, the hosts removed, an error naming it.
  int interrupt_fd = -1;
  // The executable the roles run as (`<it> ps-role ...`); empty: this one.
  std::string role_binary;
  // Tests only, with processes: this role ("ps0", "worker1") kills itself
  // (SIGKILL) -- a shard once set up, a worker mid-run.
  std::string kill_role;
};

// What the whole process (every shard and worker thread, gRPC's own threads
// included) spent during a phase's timed part (getrusage deltas).
struct PhaseCost {
  double user_seconds = 0;
  double sys_seconds = 0;
  int64_t minor_faults = 0;
  int64_t voluntary_switches = 0;
  int64_t involuntary_switches = 0;
  // The shards' optimizer time and updates applied (Stats deltas, all shards).
  double shard_apply_seconds = 0;
  int64_t shard_applied_updates = 0;
};

struct PhaseResult {
  int64_t rounds = 0;            // timed rounds, all workers together
  double max_seconds = 0;        // the slowest worker's timed seconds
  double gbps = 0;               // summed per-worker goodput, Gbit/s
  double push_call_seconds = 0;  // time inside PsClient::Push, all workers
  double pull_call_seconds = 0;  // time inside PsClient::Pull, all workers
  // Heartbeat round trips during the timed rounds (PS phases): how many, the
  // longest and the mean, all workers together.
  int64_t heartbeats = 0;
  double heartbeat_max_ms = 0;
  double heartbeat_mean_ms = 0;
  int64_t heartbeat_failures = 0;
  PhaseCost cost;
};

struct PsBenchResult {
  PhaseResult push;
  PhaseResult pull;
  PhaseResult pushpull;
  PhaseResult tcp_oneway;       // rounds, max_seconds, gbps only
  PhaseResult tcp;              // both ways at once; the same
  double pushpull_to_tcp = 0;   // pushpull.gbps / tcp.gbps
  double memcpy_gbps = 0;       // best slice (see memcpy_bandwidth.h)
  double memcpy_mean_gbps = 0;  // whole loop
  int64_t memcpy_buffer_bytes = 0;
  double ratio = 0;  // pushpull.gbps / memcpy_gbps

  // Accounting, all workers and phases together, warm-up included.
  int64_t push_calls = 0;  // PsClient::Push calls (each sends every key once)
  int64_t pull_calls = 0;  // PsClient::Pull calls (each fetches every key once)
  int64_t init_bytes = 0;  // bytes the chief's Init installed (keys * key_bytes)
  // What the shards reported when they returned (final_stats), in shard order.
  std::vector<ShardLoad> shard_loads;
  int64_t shard_bytes_in = 0;   // summed over shards: init + pushes
  int64_t shard_bytes_out = 0;  // summed over shards: pulls
};

// InvalidArgument naming the bad option (also when emulated hosts are asked
// for where this process cannot make them: not root, no iproute2).
absl::Status ValidatePsBenchOptions(const PsBenchOptions& options);

// Runs the benchmark. InvalidArgument for bad options (nothing started);
// otherwise the first error a role hit.
absl::StatusOr<PsBenchResult> RunPsBench(const PsBenchOptions& options);

// The human table (several lines, newline-terminated).
std::string FormatPsBenchTable(const PsBenchOptions& options, const PsBenchResult& result);
// Diagnostics: each phase's process CPU (user/sys), minor page faults per MiB
// moved and context switches per round; per round, the time inside Push and
// Pull and the shards' optimizer time; every shard's load.
std::string FormatPsBenchProfile(const PsBenchOptions& options, const PsBenchResult& result);
// One JSON object on one line (no newline): push_gbps, pull_gbps,
// pushpull_gbps, memcpy_gbps (Gbit/s, as every *_gbps of the benchmarks),
// ratio, tcp_oneway_gbps, tcp_gbps (both ways), pushpull_to_tcp, workers,
// push_heartbeat_max_ms, pull_heartbeat_max_ms, pushpull_heartbeat_max_ms
// (the longest heartbeat round trip during each phase), heartbeats,
// heartbeat_failures, workers, servers, keys, key_bytes, transport, mode ("threads", "processes" or
// "emulated_hosts"; with the last, also emulated_hosts and link_gbps, 0 for
// uncapped). A non-finite figure is written as null.
std::string FormatPsBenchJson(const PsBenchOptions& options, const PsBenchResult& result);

}  // namespace pstrain::bench
