// Host lists from the launcher: where srun or mpirun placed every rank.
//
// A cluster started by one `srun` or `mpirun` need not list its hosts: each
// process can work out where every rank runs from what the launcher tells
// it (Slurm's node list and tasks per node; Open MPI's hostfile), and then
// rank r listens on `<its host>:<cluster.port + its index among the ranks on
// that host>`. ResolveRole (cluster.h) uses this when neither the config nor
// TF_CONFIG nor the flags list any host. docs/CONFIG.md, "Host lists from
// the launcher", states the rules for users.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config/cluster.h"
#include "proto/config.pb.h"

namespace pstrain {

// Slurm's compressed host list expanded in order: "node[01-03,7],gpu-a"
// -> node01 node02 node03 node7 gpu-a. A range keeps the zero padding of its
// first bound; several bracket groups in one name expand as a product
// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). InvalidArgument naming the
// offending part for unbalanced brackets, empty items, bad or reversed
// ranges.
absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(absl::string_view list);

// Slurm's tasks per node expanded, one count per node: "2(x3),1" -> 2 2 2 1.
absl::StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(absl::string_view counts);

// One host of an Open MPI hostfile; slots 0 means the line gave none (Open
// MPI then counts that host's cores, which no other host can know).
struct HostSlots {
  std::string host;
  int slots = 0;
};
// An Open MPI hostfile ("host [slots=N] [max_slots=M]" lines, '#' comments,
// blank lines), hosts in order of first appearance; a host listed again
// adds its slots, as Open MPI does. `source` names the file in errors,
// which also name the line.
absl::StatusOr<std::vector<HostSlots>> ParseHostfile(absl::string_view text, absl::string_view source);

// Where a launcher put one rank: its host and its index among the ranks on
// that host.
struct RankPlace {
  std::string host;
  int local_index = 0;
  bool operator==(const RankPlace&) const = default;
};
enum class Distribution { kBlock, kCyclic };
// Places sum(counts) ranks on `hosts` (counts[i] ranks on hosts[i]): kBlock
// fills each host in turn (Slurm's default, Open MPI's --map-by slot);
// kCyclic deals one rank to each host that has room, round and round.
std::vector<RankPlace> PlaceRanks(const std::vector<std::string>& hosts, const std::vector<int>& counts,
                                  Distribution distribution);

// The host:port of every rank of `launched`'s launch, in rank order, from
// the launcher's environment (`getenv` as in LaunchRanksFromEnvironment):
//   srun:   SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST), SLURM_STEP_TASKS_PER_NODE
//           (else SLURM_TASKS_PER_NODE), SLURM_DISTRIBUTION block (default) or cyclic;
//           this task's SLURMD_NODENAME and SLURM_LOCALID, when set, must agree.
//   mpirun: cluster.hostfile, else $OMPI_MCA_orte_default_hostfile, placed by
//           slot; without one, every rank must be on this host
//           (OMPI_COMM_WORLD_LOCAL_SIZE = size) and is "localhost". This
//           rank's OMPI_COMM_WORLD_LOCAL_RANK, when set, must agree.
//   RANK/WORLD_SIZE: gives no hosts (InvalidArgument saying what to do).
// Ports are cluster.port + local index. Errors are InvalidArgument naming the
// variable, file or line that is wrong.
absl::StatusOr<std::vector<std::string>> LaunchedHostPorts(const LaunchRank& launched, const ClusterConfig& cluster,
                                                           const std::function<const char*(const char*)>& getenv);

}  // namespace pstrain
