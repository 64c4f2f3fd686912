// Cluster lists and this process's role.
//
// The cluster (ps_hosts, worker_hosts) and the role (job, index) come from
// these places; a later one in this list wins:
//   1. the config file (cluster.ps_hosts, cluster.worker_hosts; no role),
//   2. a launcher's rank (role only): Open MPI's mpirun, Slurm's srun, a
//      PyTorchJob-style operator (see LaunchRank),
//   3. the TF_CONFIG environment variable (Kubeflow TFJob's JSON),
//   4. command-line flags (--ps_hosts, --worker_hosts, --job_name,
//      --task_index, --index).
// The chief is worker 0. docs/CONFIG.md describes the rules for users.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/host_port.h"
#include "proto/config.pb.h"

namespace pstrain {

enum class RoleKind { kPs, kWorker };

// This process's place in the cluster: the job and the index in its host list.
struct Role {
  RoleKind kind;
  int index;
  bool operator==(const Role&) const = default;
};

// e.g. "worker 1", "ps 0".
std::string RoleToString(const Role& role);

// Cluster settings from the command line; empty / -1 means "not given".
struct ClusterFlags {
  std::string job_name;      // "ps" | "worker"; must agree with the binary
  int task_index = -1;       // TensorFlow's --task_index
  int index = -1;            // --index (the binary fixes the job); must agree with task_index
  std::string ps_hosts;      // comma-separated host:port list, replaces the ps list
  std::string worker_hosts;  // comma-separated host:port list, replaces the worker list
};

// The host checks config validation also does: at least one worker host,
// every entry a valid host:port (port 1..65535, non-empty host, IPv6 in
// brackets), no entry used twice across both lists. Errors are
// InvalidArgument, "<source>: field 'cluster.worker_hosts[1]': expected ...".
// Whether ps hosts are required depends on the strategy, whose config check
// says so (worker/strategy.h).
absl::Status ValidateHosts(const ClusterConfig& cluster, std::string_view source);

// The launchers that start every process of a job from one command.
enum class Launcher { kMpirun, kSrun, kRankEnv };

// The rank such a launcher gave this process.
struct LaunchRank {
  Launcher launcher = Launcher::kMpirun;
  int rank = 0;
  int size = 0;
  // The variables it came from, e.g. "OMPI_COMM_WORLD_RANK=1,
  // OMPI_COMM_WORLD_SIZE=4 (mpirun)".
  std::string source;
};
// The launchers' ranks in the environment (`getenv` reads one variable,
// null when unset), in precedence order: Open MPI (OMPI_COMM_WORLD_RANK,
// OMPI_COMM_WORLD_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS), PyTorchJob
// style (RANK, WORLD_SIZE). InvalidArgument naming the variables when a
// pair is incomplete or does not make a rank in [0, size).
absl::StatusOr<std::vector<LaunchRank>> LaunchRanksFromEnvironment(
    const std::function<const char*(const char*)>& getenv);

// Applies TF_CONFIG (JSON text; null or blank means unset) and then the flags
// onto config->cluster, validates the result (ValidateHosts) and decides this
// process's role. `binary_role` is the job the binary runs (pstrain-ps =>
// kPs, pstrain-worker => kWorker).
//
// TF_CONFIG: {"cluster": {"ps": [...], "worker": [...], "chief": [...]},
//             "task": {"type": "worker", "index": 1}}
//   - "cluster", when present, defines both lists (a missing job is empty).
//     A "chief" list (at most one entry) is prepended to the workers; "master"
//     is accepted as an older name of "chief".
//   - task type "chief" is worker 0; with a chief list, worker i is worker i+1.
//   - "environment" and "rpc_layer" are accepted and ignored.
// The role: if the flags give an index (--index or --task_index) it is used
// with the binary's job; otherwise TF_CONFIG's task; otherwise a launcher's
// rank (`launched`, LaunchRanksFromEnvironment's) whose size fits the
// cluster of P PS and W workers:
//   - size P + W (P > 0): ranks 0..P-1 are PS shards 0..P-1, rank P + i is
//     worker i. The role may then be the other binary's job: the caller runs
//     that binary instead (role_main.h).
//   - size W, for the worker binary: rank i is worker i (the workers alone
//     under mpirun, as pstrain-launch starts a collective-mpi experiment).
// Launchers whose size fits neither are ignored (e.g. the srun that started
// mpirun); two that fit and disagree are an error naming both. Otherwise
// index 0 when the binary's host list has exactly one entry; otherwise an
// error. Every job named (--job_name, TF_CONFIG task type) must be the
// binary's. `how`, when given, receives where the role came from (printed
// at start-up).
//
// Errors (InvalidArgument) name their source: "--index=3 is out of range ...",
// "TF_CONFIG: ...". On error `config` may be partly updated.
//
// Host lists from the launcher: when both lists are still empty after the
// file, TF_CONFIG and the flags, and a launcher started this process, the
// first launcher (in the order above) gives every rank's host:port through
// `launched_hosts` (LaunchedHostPorts in launcher_hosts.h, which role
// binaries pass); the first cluster.num_ps of them become ps_hosts, the rest
// worker_hosts. cluster.num_ps must also match ps_hosts wherever the lists
// came from.
using LaunchedHostsFn =
    std::function<absl::StatusOr<std::vector<std::string>>(const LaunchRank&, const ClusterConfig&)>;
absl::StatusOr<Role> ResolveRole(RoleKind binary_role, const ClusterFlags& flags, const char* tf_config_json,
                                 ExperimentConfig* config, const std::vector<LaunchRank>& launched = {},
                                 std::string* how = nullptr, const LaunchedHostsFn& launched_hosts = nullptr);

}  // namespace pstrain
