// The PS benchmark's cluster with every shard and every worker in a process
// of its own (`pstrain-bench ps --processes`), as users run them.
//
// The bench starts itself once per role (`pstrain-bench ps-role`,
// ps_bench_role.h: ps0.., worker0..) under a ClusterProcesses supervisor
// (tools/launch/process_group.h: own process group, stdout+stderr copied to
// the bench's stderr prefixed "[worker0] ", SIGKILL when the bench dies)
// and talks to each over a control channel (ps_bench_control.h, a Unix
// socket in a fresh directory): it hands out the setup, is the workers'
// meeting point (taking every role's CPU usage from /proc as each meeting
// completes, and releasing the ports' reservations at the first) and
// collects what each worker measured and each shard's final stats -- the
// same PsBenchRun as the threads give, so the same report.
//
// Never a hang, never a role left behind: every step has a deadline (roles
// connecting and the first meeting kPsBenchStartupSeconds, each later
// meeting kPsBenchRpcSeconds); a role that exits non-zero or dies stops
// all the others (SIGTERM, SIGKILL 5 s later) and is named with its exit
// status and what it said ("worker0 was killed by signal 9 (Killed)"); the
// bench missing a deadline stops them too.
//
// With emulated hosts (options.emulated_hosts: tools/launch/emulated_hosts.h)
// each role runs on its host (`ip netns exec`); shards listen on their
// hosts' addresses (ps_bench_cluster.h kHostBasePort); the control socket,
// a path, reaches every namespace. The hosts are removed when the run ends,
// also when it fails or is interrupted (options.interrupt_fd).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/ps_bench.h"
#include "tools/bench/ps_bench_cluster.h"

namespace pstrain::bench {

// Runs the cluster of `options` (processes) to the end: the first error as
// above, or a role's own ("worker 1: ...").
absl::StatusOr<PsBenchRun> RunClusterInProcesses(const PsBenchOptions& options);

// Which emulated host each role is on (options.emulated_hosts > 0): shards
// round-robin on the first `shard_hosts` hosts, workers round-robin on the
// others (ps_bench.h says how many).
struct HostPlacement {
  int shard_hosts = 0;
  std::vector<int> shard_host;
  std::vector<int> worker_host;
};
HostPlacement PlaceOnHosts(const PsBenchOptions& options);
// The CPUs of each emulated host as options.host_cpus says (an empty list
// per host: shared); InvalidArgument naming what is wrong with it.
absl::StatusOr<std::vector<std::vector<int>>> HostCpus(const PsBenchOptions& options);
// "emulated hosts: 3 (shards on host 0, workers on hosts 1-2), links 10
// Gbit/s each way, CPUs of their own (0, 1, 2-3)", or "..., CPUs shared".
std::string DescribeEmulatedHosts(const PsBenchOptions& options);

}  // namespace pstrain::bench
