// What pstrain-ps and pstrain-worker share at start-up: the command-line
// flags, loading and validating the config, and resolving this process's role
// (flags > TF_CONFIG > config file).
//
// Flags: --config=FILE (required), --index=N, --job_name, --task_index,
// --ps_hosts, --worker_hosts (comma-separated host:port), --run_dir.
#pragma once

#include <string>

#include "common/config/cluster.h"
#include "proto/config.pb.h"

namespace pstrain {

struct RoleSetup {
  ExperimentConfig config;
  Role role;
  std::string run_dir;  // may be empty
};

// Parses flags (gflags) and sets up logging. On a bad config or bad flags it
// prints one message naming what was wrong and exits with code 2.
// The config is validated by the checks of the modules the binary links
// (common/config/config_checks.h).
RoleSetup InitRole(int* argc, char*** argv, RoleKind binary_role);

// Exit code for a run that failed after start-up.
constexpr int kExitFailure = 1;
constexpr int kExitBadConfig = 2;

}  // namespace pstrain
