// Cluster lists and this process's role.
//
// The cluster (ps_hosts, worker_hosts) and the role (job, index) come from
// three places; a later one in this list wins:
//   1. the config file (cluster.ps_hosts, cluster.worker_hosts; no role),
//   2. the TF_CONFIG environment variable (Kubeflow TFJob's JSON),
//   3. command-line flags (--ps_hosts, --worker_hosts, --job_name,
//      --task_index, --index).
// The chief is worker 0. docs/CONFIG.md describes the rules for users.
#pragma once

#include <string>
#include <string_view>

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

// "ps" or "worker" (the job names of flags and TF_CONFIG).
std::string_view RoleKindName(RoleKind kind);
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

// The rank mpirun gives a process (OMPI_COMM_WORLD_RANK / _SIZE); rank -1:
// not started by mpirun.
struct MpiRank {
  int rank = -1;
  int size = 0;
};
// From the two variables' values (null: unset). InvalidArgument when one is
// missing or they do not make a rank in [0, size).
absl::StatusOr<MpiRank> MpiRankFromEnvironment(const char* rank, const char* size);

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
// with the binary's job; otherwise TF_CONFIG's task; otherwise, for a worker
// started by mpirun, its MPI rank (and mpirun's size must be the number of
// workers); otherwise index 0 when the binary's host list has exactly one
// entry; otherwise an error. Every job named (--job_name, TF_CONFIG task
// type) must be the binary's.
//
// Errors (InvalidArgument) name their source: "--index=3 is out of range ...",
// "TF_CONFIG: ...". On error `config` may be partly updated.
absl::StatusOr<Role> ResolveRole(RoleKind binary_role, const ClusterFlags& flags, const char* tf_config_json,
                                 ExperimentConfig* config, const MpiRank& mpi = {});

}  // namespace pstrain
