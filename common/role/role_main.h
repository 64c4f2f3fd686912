// What pstrain-ps and pstrain-worker share at start-up: the command-line
// flags, loading and validating the config, and resolving this process's role
// (flags > TF_CONFIG > config file).
//
// Flags: --config=FILE (required), --index=N, --job_name, --task_index,
// --ps_hosts, --worker_hosts (comma-separated host:port), --run_dir,
// --metrics_port, --listen_address (sets cluster.listen_address for this
// process), --restore, --check_config (validate everything this role would, print "config ok:
// <file> (<role>)" and then what launching it needs, one "needs: <what>" line
// each (today "needs: mpirun" when the workers must be the ranks of one
// mpirun), and exit 0; or print the error and exit 2; start nothing: what
// pstrain-launch asks of every role before it starts any).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/config/cluster.h"
#include "common/telemetry/http_server.h"
#include "common/telemetry/metric_registry.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"

namespace pstrain {

struct RoleSetup {
  ExperimentConfig config;
  Role role;
  // Where outputs go: --run_dir, or by default runs/<experiment>-<time>/ in
  // the current directory (created when something is written there).
  std::string run_dir;
  // --check_config: the config passed; the binary prints what launching it
  // needs and exits 0 instead of running.
  bool check_only = false;
  // This process's /metrics and /healthz port: --metrics_port, else the
  // config's metrics_port plus this role's offset (PS i: i; worker i:
  // num_ps + i); 0: none.
  int metrics_port = 0;
  // The config's `security`, loaded and checked (common/transport/security.h).
  TransportSecurity security;
  // --byte_scale, checked against the config (common/config/byte_scale.h).
  double byte_scale = 1;
};

// Serves `registry` at /metrics and a /healthz answering OK on
// setup.metrics_port of cluster.listen_address's host (every interface by
// default); null when the port is 0. With security.metrics_require_token,
// requests without the token are refused 401. An error names the port
// ("metrics_port 9100: address already in use").
absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsEndpoint(const RoleSetup& setup,
                                                                        const MetricRegistry* registry);

// The config's transport with its max_message_bytes and security. An error
// (a transport this build lacks) is a config matter: exit kExitBadConfig.
absl::StatusOr<std::unique_ptr<Transport>> CreateRoleTransport(const RoleSetup& setup);

// What this machine must have for `config` (a GPU for device gpu): checked
// at start-up and by --check_config, after the config itself. An error is
// said as a bad config is (exit 2), prefixed with the config file.
using MachineCheck = std::function<absl::Status(const ExperimentConfig& config)>;

// Parses flags (common/command_line/command_line.h: --help, --helpfull, a
// bad flag exits 2) and sets up logging. On a bad config it prints one
// message naming what was wrong and exits with code 2. The config is
// validated by the checks of the modules the binary links
// (common/config/config_checks.h), then by `machine_check` when given.
// --check_config without --index, TF_CONFIG or a launcher's rank checks as
// role 0 of the binary's kind.
RoleSetup InitRole(int* argc, char*** argv, RoleKind binary_role, const MachineCheck& machine_check = {});

// "runs/<experiment>-<YYYYmmdd-HHMMSS>": where a run's outputs go by default
// (pstrain-launch uses the same shape).
std::string DefaultRunDir(const std::string& experiment);

// Exit code for a run that failed after start-up.
constexpr int kExitFailure = 1;
constexpr int kExitBadConfig = 2;

}  // namespace pstrain
