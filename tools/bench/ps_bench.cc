#include "tools/bench/ps_bench.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/transport/transport.h"
#include "tools/bench/memcpy_bandwidth.h"
#include "tools/bench/ps_bench_cluster.h"
#include "tools/bench/ps_bench_processes.h"
#include "tools/bench/ps_bench_threads.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::bench {
namespace {

constexpr int64_t kMinMemcpyBytes = int64_t{64} << 20;

// The yardstick: single-thread memcpy over max(keys * key_bytes, 64 MiB).
void MeasureYardstick(const PsBenchOptions& options, PsBenchResult& result) {
  result.memcpy_buffer_bytes = std::max(options.key_bytes * options.keys, kMinMemcpyBytes);
  const MemcpyBandwidth memcpy_bw = MeasureMemcpyBandwidth(result.memcpy_buffer_bytes, options.memcpy_seconds);
  result.memcpy_gbps = memcpy_bw.gbps;
  result.memcpy_mean_gbps = memcpy_bw.mean_gbps;
}

// A phase's rounds, times and goodput over every worker (each key's bytes
// counted once per round); `timing` picks a worker's timing of the phase.
PhaseResult SummarizePhase(const PsBenchRun& run, const std::function<const PhaseTiming&(const WorkerTally&)>& timing,
                           int64_t bytes_per_round) {
  PhaseResult result;
  for (const WorkerTally& w : run.workers) {
    const PhaseTiming& t = timing(w);
    result.rounds += t.rounds;
    result.max_seconds = std::max(result.max_seconds, t.seconds);
    result.push_call_seconds += t.push_call_seconds;
    result.pull_call_seconds += t.pull_call_seconds;
    if (t.seconds > 0) result.gbps += static_cast<double>(bytes_per_round) * t.rounds * 8 / t.seconds / 1e9;
    result.heartbeats += t.heartbeats.count;
    result.heartbeat_failures += t.heartbeats.failures;
    result.heartbeat_max_ms = std::max(result.heartbeat_max_ms, t.heartbeats.max_seconds * 1e3);
    result.heartbeat_mean_ms += t.heartbeats.sum_seconds * 1e3;
  }
  if (result.heartbeats > 0) result.heartbeat_mean_ms /= static_cast<double>(result.heartbeats);
  return result;
}

// What the timed part of a phase cost: the shards' optimizer time and
// updates, the process's CPU, faults and context switches.
PhaseCost CostOf(const PhaseSpan& span) {
  PhaseCost cost;
  cost.shard_apply_seconds = span.load[1].apply_seconds() - span.load[0].apply_seconds();
  cost.shard_applied_updates = span.load[1].applied_updates() - span.load[0].applied_updates();
  if (span.has_usage) {
    const UsageSnapshot& a = span.usage[0];
    const UsageSnapshot& b = span.usage[1];
    cost.user_seconds = b.user_seconds - a.user_seconds;
    cost.sys_seconds = b.sys_seconds - a.sys_seconds;
    cost.minor_faults = b.minor_faults - a.minor_faults;
    cost.voluntary_switches = b.voluntary_switches - a.voluntary_switches;
    cost.involuntary_switches = b.involuntary_switches - a.involuntary_switches;
  }
  return cost;
}

// The phases' figures, the ratio to memcpy and the byte accounting from
// what the run measured.
void AddFigures(const PsBenchOptions& options, const PsBenchRun& run, PsBenchResult& result) {
  const int64_t bytes_per_round = options.key_bytes * options.keys;
  PhaseResult* phases[kNumPhases] = {&result.push, &result.pull, &result.pushpull};
  for (int p = 0; p < kNumPhases; ++p) {
    *phases[p] = SummarizePhase(
        run, [p](const WorkerTally& w) -> const PhaseTiming& { return w.timing[p]; }, bytes_per_round);
    phases[p]->cost = CostOf(run.phases[p]);
  }
  PhaseResult* tcp_phases[kNumTcpPhases] = {&result.tcp_oneway, &result.tcp};
  for (int t = 0; t < kNumTcpPhases; ++t) {
    *tcp_phases[t] = SummarizePhase(
        run, [t](const WorkerTally& w) -> const PhaseTiming& { return w.tcp[t]; }, bytes_per_round);
  }
  result.ratio = result.memcpy_gbps > 0 ? result.pushpull.gbps / result.memcpy_gbps : 0;
  result.pushpull_to_tcp = result.tcp.gbps > 0 ? result.pushpull.gbps / result.tcp.gbps : 0;
  for (const WorkerTally& w : run.workers) {
    result.push_calls += w.push_calls;
    result.pull_calls += w.pull_calls;
  }
  result.init_bytes = bytes_per_round;
  for (const StatsResponse& stats : run.final_stats) {
    result.shard_loads.push_back(stats.load());
    result.shard_bytes_in += stats.load().bytes_in();
    result.shard_bytes_out += stats.load().bytes_out();
  }
}

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

// --emulated_hosts and --link_gbps: their values, and whether this process
// can make the hosts.
absl::Status ValidateHostOptions(const PsBenchOptions& options) {
  if (options.link_gbps != 0 && options.emulated_hosts == 0) {
    return absl::InvalidArgumentError("--link_gbps caps the links of emulated hosts: give --emulated_hosts too");
  }
  if (options.host_cpus != "auto" && options.emulated_hosts == 0) {
    return absl::InvalidArgumentError("--host_cpus places emulated hosts: give --emulated_hosts too");
  }
  if (options.emulated_hosts == 0) return absl::OkStatus();
  if (absl::Status s = HostCpus(options).status(); !s.ok()) return s;
  if (!options.processes) return absl::InvalidArgumentError("--emulated_hosts runs the roles as --processes");
  const int roles = options.servers + options.workers;
  if (options.emulated_hosts < 2 || options.emulated_hosts > roles) {
    return absl::InvalidArgumentError(absl::StrCat("--emulated_hosts must be 2 to --servers + --workers (", roles,
                                                   "), got ", options.emulated_hosts,
                                                   " (one host: --processes alone, on loopback)"));
  }
  if (!(options.link_gbps >= 0 && options.link_gbps <= 400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--link_gbps must be in (0, 400] (0: uncapped), got ", options.link_gbps));
  }
  if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--emulated_hosts ", options.emulated_hosts, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePsBenchOptions(const PsBenchOptions& options) {
  if (options.workers < 1)
    return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", options.workers));
  if (options.servers < 1)
    return absl::InvalidArgumentError(absl::StrCat("--servers must be >= 1, got ", options.servers));
  if (options.keys < 1) return absl::InvalidArgumentError(absl::StrCat("--keys must be >= 1, got ", options.keys));
  if (options.key_bytes <= 0 || options.key_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--key_bytes must be a positive multiple of 4 (float32 keys), got ", options.key_bytes));
  }
  // One request carries every key of a shard; gRPC messages are at most 2 GiB - 1.
  const int64_t per_shard_keys = (options.keys + options.servers - 1) / options.servers;
  if (options.key_bytes > (int64_t{INT_MAX} - 4096) / per_shard_keys) {
    return absl::InvalidArgumentError(absl::StrCat("--keys x --key_bytes per shard (", per_shard_keys, " x ",
                                                   options.key_bytes, ") exceeds the 2 GiB message limit"));
  }
  std::vector<std::string> known = RegisteredTransports();
  known.push_back("inproc");  // not in the registry: the bench creates it directly (diagnostic baseline)
  if (std::find(known.begin(), known.end(), options.transport) == known.end()) {
    const std::string missing = TransportRegistry().UnavailableReason(options.transport);  // e.g. built without UCX
    return absl::InvalidArgumentError(absl::StrCat("unknown --transport '", options.transport,
                                                   "'; known: ", absl::StrJoin(known, ", "),
                                                   missing.empty() ? "" : absl::StrCat(" (", missing, ")")));
  }
  if (options.rounds < 0)
    return absl::InvalidArgumentError(absl::StrCat("--rounds must be >= 0, got ", options.rounds));
  if (options.rounds == 0 && !(options.seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--seconds must be > 0, got ", options.seconds));
  }
  if (options.warmup_rounds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup_rounds must be >= 0, got ", options.warmup_rounds));
  }
  if (!(options.memcpy_seconds > 0)) return absl::InvalidArgumentError("memcpy seconds must be > 0");
  if (options.window_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--window_bytes must be >= 0 (0: no limit), got ", options.window_bytes));
  }
  if (options.pushes_per_shard < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pushes_per_shard must be >= 0 (0: no limit), got ", options.pushes_per_shard));
  }
  if (options.placement != "round_robin" && options.placement != "greedy") {
    return absl::InvalidArgumentError(absl::StrCat("unknown placement '", options.placement, "'"));
  }
  if (options.processes && options.transport == "inproc") {
    return absl::InvalidArgumentError("--transport inproc is one object in one process: not with --processes");
  }
  return ValidateHostOptions(options);
}

absl::StatusOr<PsBenchResult> RunPsBench(const PsBenchOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(ValidatePsBenchOptions(options));
  PsBenchResult result;
  // 1. The yardstick, before any cluster thread exists.
  MeasureYardstick(options, result);
  // 2. The cluster (ports, config, placement, then the roles), every shard
  // and worker a process of its own or a thread of this one.
  PsBenchRun run;
  if (options.processes) {
    PSTRAIN_ASSIGN_OR_RETURN(run, RunClusterInProcesses(options));
  } else {
    PSTRAIN_ASSIGN_OR_RETURN(PsBenchSetup setup, SetUpCluster(options));
    PSTRAIN_ASSIGN_OR_RETURN(run, RunClusterInThreads(options, setup));
  }
  // 3. Figures.
  AddFigures(options, run, result);
  return result;
}

// " security=tls+token" and the like; "" for plaintext.
static std::string SecurityName(const PsBenchOptions& options) {
  const TransportSecurity& s = options.security;
  if (!s.enabled()) return "";
  std::string name = s.tls ? (s.require_client_cert ? "mtls" : "tls") : "";
  if (!s.token.empty()) name += name.empty() ? "token" : "+token";
  return " security=" + name;
}

// How the roles ran: "threads", "processes" or "emulated_hosts".
static std::string ModeName(const PsBenchOptions& options) {
  if (options.emulated_hosts > 0) return "emulated_hosts";
  return options.processes ? "processes" : "threads";
}

// With emulated hosts: "own" when each ran on CPUs of its own, else "shared".
static std::string HostCpusName(const PsBenchOptions& options) {
  absl::StatusOr<std::vector<std::vector<int>>> cpus = HostCpus(options);
  return cpus.ok() && !cpus->empty() && !cpus->front().empty() ? "own" : "shared";
}

std::string FormatPsBenchTable(const PsBenchOptions& options, const PsBenchResult& result) {
  std::string out = absl::StrFormat("ps bench: workers=%d servers=%d keys=%d key_bytes=%d transport=%s%s%s\n",
                                    options.workers, options.servers, options.keys, options.key_bytes,
                                    options.transport, SecurityName(options), options.processes ? " processes" : "");
  if (options.emulated_hosts > 0) absl::StrAppend(&out, DescribeEmulatedHosts(options), "\n");
  auto phase = [&out](const char* name, const PhaseResult& p) {
    absl::StrAppendFormat(&out, "%-22s %10.2f Gbps  (%d rounds, %.2f s", name, p.gbps, p.rounds, p.max_seconds);
    if (p.heartbeats > 0) {
      absl::StrAppendFormat(&out, "; %d heartbeats, round trip max %.1f ms, mean %.1f ms", p.heartbeats,
                            p.heartbeat_max_ms, p.heartbeat_mean_ms);
      if (p.heartbeat_failures > 0) absl::StrAppendFormat(&out, ", %d FAILED", p.heartbeat_failures);
    }
    out += ")\n";
  };
  phase("push", result.push);
  phase("pull", result.pull);
  phase("push+pull", result.pushpull);
  absl::StrAppendFormat(&out, "%-22s %10s       (pipelined, window %d bytes, %d pushes per shard)\n", "", "",
                        options.window_bytes, options.pushes_per_shard);
  phase("tcp one way", result.tcp_oneway);
  phase("tcp both ways", result.tcp);
  absl::StrAppendFormat(&out, "%-22s %10.2f Gbps  (%d MiB buffer)\n", "memcpy (1 thread)", result.memcpy_gbps,
                        result.memcpy_buffer_bytes >> 20);
  absl::StrAppendFormat(&out, "%-22s %10.3f\n", "ratio push+pull/memcpy", result.ratio);
  absl::StrAppendFormat(&out, "%-22s %10.3f  (tcp both ways)\n", "ratio push+pull/tcp", result.pushpull_to_tcp);
  return out;
}

std::string FormatPsBenchProfile(const PsBenchOptions& options, const PsBenchResult& result) {
  std::string out = options.processes ? "process cost per phase (timed part; every role's process, all threads):\n"
                                      : "process cost per phase (timed part; all threads):\n";
  absl::StrAppendFormat(&out, "%-10s %7s %7s %7s %9s %11s %11s %9s %9s\n", "phase", "wall s", "user s", "sys s",
                        "cpu/wall", "cpu s/GB*", "minflt/MiB", "vcsw/rnd", "ivcsw/rnd");
  auto line = [&](const char* name, const PhaseResult& p, int copies_per_round) {
    const double counted = static_cast<double>(p.rounds) * options.keys * options.key_bytes;
    const double mib = counted * copies_per_round / (1 << 20);  // bytes that crossed the wire
    const double cpu = p.cost.user_seconds + p.cost.sys_seconds;
    absl::StrAppendFormat(&out, "%-10s %7.2f %7.2f %7.2f %9.2f %11.3f %11.2f %9.1f %9.1f\n", name, p.max_seconds,
                          p.cost.user_seconds, p.cost.sys_seconds, p.max_seconds > 0 ? cpu / p.max_seconds : 0,
                          counted > 0 ? cpu / (counted / 1e9) : 0, mib > 0 ? p.cost.minor_faults / mib : 0,
                          p.rounds > 0 ? static_cast<double>(p.cost.voluntary_switches) / p.rounds : 0,
                          p.rounds > 0 ? static_cast<double>(p.cost.involuntary_switches) / p.rounds : 0);
  };
  line("push", result.push, 1);
  line("pull", result.pull, 1);
  line("push+pull", result.pushpull, 2);
  out += "(* CPU seconds per GB of counted goodput; minflt per MiB that crossed the wire)\n";
  absl::StrAppendFormat(&out, "%-10s %12s %12s %16s %14s\n", "phase", "ms/push", "ms/pull", "shard apply ms/push",
                        "apply GB/s");
  auto split = [&](const char* name, const PhaseResult& p, bool pushes, bool pulls) {
    const double n = static_cast<double>(p.rounds);
    const double applied_gb = static_cast<double>(p.cost.shard_applied_updates) * options.key_bytes / 1e9;
    absl::StrAppendFormat(
        &out, "%-10s %12.3f %12.3f %16.3f %14.2f\n", name, pushes && n > 0 ? p.push_call_seconds * 1e3 / n : 0,
        pulls && n > 0 ? p.pull_call_seconds * 1e3 / n : 0, pushes && n > 0 ? p.cost.shard_apply_seconds * 1e3 / n : 0,
        p.cost.shard_apply_seconds > 0 ? applied_gb / p.cost.shard_apply_seconds : 0);
  };
  split("push", result.push, true, false);
  split("pull", result.pull, false, true);
  split("push+pull", result.pushpull, true, true);
  absl::StrAppendFormat(&out, "memcpy: best slice %.2f Gbps, mean %.2f Gbps\n", result.memcpy_gbps,
                        result.memcpy_mean_gbps);
  for (const ShardLoad& load : result.shard_loads) {
    absl::StrAppendFormat(&out, "shard %d: bytes_in=%d bytes_out=%d applied_updates=%d apply_seconds=%.3f\n",
                          load.shard(), load.bytes_in(), load.bytes_out(), load.applied_updates(),
                          load.apply_seconds());
  }
  return out;
}

std::string FormatPsBenchJson(const PsBenchOptions& options, const PsBenchResult& result) {
  // The transport name is one ValidatePsBenchOptions accepts (a registered one
  // or "inproc"): no escaping needed.
  return absl::StrCat(
      "{\"push_gbps\":", JsonNumber(result.push.gbps), ",\"pull_gbps\":", JsonNumber(result.pull.gbps),
      ",\"pushpull_gbps\":", JsonNumber(result.pushpull.gbps), ",\"memcpy_gbps\":", JsonNumber(result.memcpy_gbps),
      ",\"ratio\":", JsonNumber(result.ratio), ",\"tcp_oneway_gbps\":", JsonNumber(result.tcp_oneway.gbps),
      ",\"tcp_gbps\":", JsonNumber(result.tcp.gbps), ",\"pushpull_to_tcp\":", JsonNumber(result.pushpull_to_tcp),
      ",\"push_heartbeat_max_ms\":", JsonNumber(result.push.heartbeat_max_ms),
      ",\"pull_heartbeat_max_ms\":", JsonNumber(result.pull.heartbeat_max_ms),
      ",\"pushpull_heartbeat_max_ms\":", JsonNumber(result.pushpull.heartbeat_max_ms),
      ",\"heartbeats\":", result.push.heartbeats + result.pull.heartbeats + result.pushpull.heartbeats,
      ",\"heartbeat_failures\":",
      result.push.heartbeat_failures + result.pull.heartbeat_failures + result.pushpull.heartbeat_failures,
      ",\"workers\":", options.workers, ",\"servers\":", options.servers, ",\"keys\":", options.keys,
      ",\"key_bytes\":", options.key_bytes, ",\"window_bytes\":", options.window_bytes,
      ",\"pushes_per_shard\":", options.pushes_per_shard, ",\"transport\":\"", options.transport, "\",\"mode\":\"",
      ModeName(options), "\"",
      options.emulated_hosts > 0 ? absl::StrCat(",\"emulated_hosts\":", options.emulated_hosts,
                                                ",\"link_gbps\":", JsonNumber(options.link_gbps), ",\"host_cpus\":\"",
                                                HostCpusName(options), "\"")
                                 : "",
      "}");
}

}  // namespace pstrain::bench
