// What pstrain-launch decides before it starts any role (launch_main.cc
// tells the whole story): the config read and checked as every role reads
// it, the roles' addresses and command lines, every role binary's
// --check_config verdict, the run directory, and how the cluster is
// supervised.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "tools/launch/cluster_addresses.h"
#include "tools/launch/process_group.h"

namespace pstrain::launch {

// The launcher's command line.
struct LaunchArgs {
  std::string config;                  // CONFIG
  std::string run_dir;                 // --run_dir; "": runs/<config stem>-<YYYYmmdd-HHMMSS>
  std::string bin_dir;                 // --bin_dir; "": the launcher's own directory
  int timeout_s = 0;                   // --timeout_s; 0: no deadline
  int grace_s = 5;                     // --grace_s
  int check_timeout_s = 30;            // --check_timeout_s
  int max_restarts = 0;                // --max_restarts
  bool check_only = false;             // --check_config: check, start nothing
  double byte_scale = 1;               // --byte_scale (common/config/byte_scale.h)
  std::vector<std::string> role_args;  // after "--": given to every role
};

struct LaunchPlan {
  std::string config;                    // the config file, as given
  ExperimentConfig experiment;           // as every role reads it
  std::string run_dir;                   // exists
  ClusterAddresses addresses;            // the hosts given to the roles (and the emulated ones)
  std::vector<RoleSpec> roles;           // PS roles, then the workers (one mpirun role for all of them)
  std::vector<std::string> accepted_by;  // the role kinds whose --check_config accepted the config
  bool workers_under_mpirun = false;
  double byte_scale = 1;  // --byte_scale, checked; the roles are given it too
  // --max_restarts with PS shards and checkpoint.dir, and no
  // timeouts.ps_recover_seconds in the config: the roles are given
  // --ps_recover_seconds=kDefaultPsRecoverSeconds, so a restarted shard is
  // restored instead of ending the run (`experiment` says so too).
  bool recovery_by_default = false;
  ClusterOptions options;  // the supervision policy; interrupt_fd left to the caller
};

// How long the chief waits for a restarted PS shard when recovery is on by
// default (LaunchPlan::recovery_by_default), before time dilation.
inline constexpr int kDefaultPsRecoverSeconds = 120;

// The launcher's exit code for an error of the steps below: 2 for
// InvalidArgument (a config or a flag refused: by the launcher or by a
// role's check), 1 for any other.
int ExitCodeOf(const absl::Status& status);

// InvalidArgument naming the first flag out of range.
absl::Status ValidateLaunchArgs(const LaunchArgs& args);

// Every step before the first role starts, in order: read CONFIG and check
// its host lists (InvalidArgument with the loader's message) and
// --byte_scale against it (every role is given it), find the role
// binaries, pick the addresses (AssignAddresses), share the cores among the
// roles (ShareCoresAmongRoles), ask every role binary to check the config
// (CheckRoles), run the workers under one mpirun when they need it (saying so
// on stdout; InvalidArgument with emulation, which cannot place them), and
// create the run directory (not with check_only). Any error means nothing
// was started.
absl::StatusOr<LaunchPlan> PrepareLaunch(const LaunchArgs& args);

}  // namespace pstrain::launch
