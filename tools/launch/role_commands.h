// The command lines and environment of a launched cluster's roles: every
// role binary runs with the same config, the addresses the launcher chose,
// the run directory and the arguments given after "--", plus its index.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/emulated_cluster.h"
#include "tools/launch/process_group.h"
#include "tools/launch/role_check.h"

namespace pstrain::launch {

struct RoleCommands {
  std::string config;                   // the config file, as given to the launcher
  std::string bin_dir;                  // holds pstrain-ps and pstrain-worker
  std::string run_dir;                  // every role's --run_dir
  std::string ps_hosts;                 // every role's --ps_hosts
  std::string worker_hosts;             // every role's --worker_hosts
  std::vector<std::string> extra_args;  // the launcher's arguments after "--", last

  // --config --index --ps_hosts --worker_hosts --run_dir, then (`check`)
  // kCheckConfigFlag, then extra_args.
  std::vector<std::string> Args(int index, bool check) const;
  // <bin_dir>/<binary>.
  std::string Binary(const std::string& binary) const;

  // "ps0".."ps<P-1>" running pstrain-ps, then "worker0".. running
  // pstrain-worker; with `emulated` (may be null) each through the prefix
  // that runs it on its emulated host.
  std::vector<RoleSpec> Roles(int num_ps, int num_workers, const EmulatedCluster* emulated) const;
  // What the launcher asks before it starts anything: each role binary that
  // has a role, once, with index 0 standing for all of its job.
  std::vector<RoleToCheck> Checks(int num_ps, int num_workers) const;
  // The workers as the ranks of one mpirun (MpirunRole): Args without
  // --index, which each rank takes from its MPI rank.
  absl::StatusOr<RoleSpec> MpirunWorkers(int num_workers) const;
};

// The roles share this machine's cores. Unless the user set them, gives each
// worker's oneDNN/OpenMP runtime an equal share of the cores
// (OMP_NUM_THREADS = cores / workers, at least 1) and makes idle OpenMP
// threads sleep rather than spin (OMP_WAIT_POLICY=PASSIVE), so they do not
// steal the cores from the PS and the other workers. Sets this process's
// environment, which every role and check inherits.
void ShareCoresAmongRoles(int num_workers);

}  // namespace pstrain::launch
