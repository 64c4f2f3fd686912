#include "common/role/role_main.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/allocator_tuning.h"
#include "common/command_line/command_line.h"
#include "common/config/byte_scale.h"
#include "common/config/config_loader.h"
#include "common/config/launcher_hosts.h"
#include "common/config/time_dilation.h"
#include "common/durable_file.h"
#include "common/host_port.h"
#include "common/lock_order_checking.h"
#include "gflags/gflags.h"
#include "glog/logging.h"

DEFINE_string(config, "", "experiment config (YAML or protobuf text format)");
DEFINE_int32(index, -1, "this process's index among its job's hosts");
DEFINE_string(job_name, "", "TensorFlow-style job name: ps or worker");
DEFINE_int32(task_index, -1, "TensorFlow-style task index (same as --index)");
DEFINE_string(ps_hosts, "", "comma-separated host:port of every PS shard (overrides the config)");
DEFINE_string(worker_hosts, "", "comma-separated host:port of every worker (overrides the config)");
DEFINE_string(run_dir, "",
              "directory for result.json and other outputs (created if missing); default "
              "runs/<experiment>-<YYYYmmdd-HHMMSS>");
DEFINE_string(restore, "",
              "worker 0: resume from this checkpoint directory (<checkpoint.dir>/ckpt-<step>) instead of the newest "
              "valid one in checkpoint.dir (sets checkpoint.restore)");
DEFINE_int32(metrics_port, -1,
             "this process's /metrics and /healthz HTTP port (0: none); default: the config's metrics_port plus the "
             "role's offset");
DEFINE_string(listen_address, "",
              "where this process binds its servers: \"cluster\" (its own cluster entry's host) or a host of this "
              "machine (sets cluster.listen_address; default: the config's, every interface)");
DEFINE_double(ps_recover_seconds, -1,
              "overrides timeouts.ps_recover_seconds when >= 0 (pstrain-launch gives it with --max_restarts and a "
              "checkpoint.dir when the config does not set it)");
DEFINE_bool(check_config, false, "validate the config as this role would, print 'config ok', exit; start nothing");
DEFINE_double(byte_scale, 1,
              "device emulated: variables of 1/b of the model's elements over links b times slower "
              "(docs/EMULATION.md, \"Byte scale\"); pstrain-launch passes its own to every role");

namespace pstrain {

std::string DefaultRunDir(const std::string& experiment) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return absl::StrCat("runs/", experiment, "-", stamp);
}

namespace {

// Replaces this process with the other role binary beside this one, with
// the same arguments and environment (a launcher's rank made this process
// the other job's) plus the resolved cluster and index as flags, so that it
// need not resolve them again. Returns only on failure.
std::string RunOtherBinary(const Role& role, const ClusterConfig& cluster, const std::vector<std::string>& args) {
  const RoleKind kind = role.kind;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "cannot find my own executable (/proc/self/exe): " + ec.message();
  const std::string binary = (self.parent_path() / (kind == RoleKind::kPs ? "pstrain-ps" : "pstrain-worker")).string();
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  copy[0] = binary;
  if (!cluster.ps_hosts().empty()) copy.push_back("--ps_hosts=" + absl::StrJoin(cluster.ps_hosts(), ","));
  copy.push_back("--worker_hosts=" + absl::StrJoin(cluster.worker_hosts(), ","));
  copy.push_back(absl::StrCat("--index=", role.index));
  for (std::string& arg : copy) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execv(binary.c_str(), argv.data());
  return absl::StrCat("cannot run ", binary, ": ", std::strerror(errno));
}

// Prints "error: <message>" and exits kExitBadConfig: how start-up refuses
// bad flags or a bad config.
[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "error: " << message << std::endl;
  std::exit(kExitBadConfig);
}

void ParseFlagsAndStartLogging(int* argc, char*** argv) {
  const std::string program = std::filesystem::path((*argv)[0]).filename().string();
  ParseCommandLine(
      {.program = program,
       .usage = "--config=FILE [--index=N] [--ps_hosts=H:P,... --worker_hosts=H:P,...] [--run_dir=DIR]\n"
                "Runs one role of the experiment in FILE (docs/CONFIG.md, \"Cluster and role\").\n"
                "--check_config checks FILE as this role would on this machine (worker 0 without --index)\n"
                "and exits 0, or 2 naming what is wrong.",
       .own_files = {"role_main"},
       .shows = nullptr},
      argc, argv);
  FLAGS_logtostderr = true;
  google::InitGoogleLogging((*argv)[0]);
}

// --config's file, parsed; not yet validated (flags and TF_CONFIG come first).
ExperimentConfig ReadConfigFlag() {
  if (FLAGS_config.empty()) Fail("--config=FILE is required");
  absl::StatusOr<ExperimentConfig> config = ReadExperimentConfig(FLAGS_config);
  if (!config.ok()) Fail(std::string(config.status().message()));
  return *std::move(config);
}

ClusterFlags ClusterFlagsFromCommandLine() {
  ClusterFlags flags;
  flags.job_name = FLAGS_job_name;
  flags.task_index = FLAGS_task_index;
  flags.index = FLAGS_index;
  flags.ps_hosts = FLAGS_ps_hosts;
  flags.worker_hosts = FLAGS_worker_hosts;
  return flags;
}

// This process's role (ResolveRole: flags > TF_CONFIG > launcher rank >
// file), with config->cluster completed. A role that came from a launcher's
// rank is printed with the cluster it resolved.
Role ResolveProcessRole(RoleKind binary_role, ExperimentConfig* config) {
  // mpirun, srun or an operator may give the role as a rank.
  absl::StatusOr<std::vector<LaunchRank>> launched =
      LaunchRanksFromEnvironment([](const char* name) { return std::getenv(name); });
  if (!launched.ok()) Fail(FLAGS_config + ": " + std::string(launched.status().message()));
  // Checking a config needs no role: the first of its kind (worker 0, the
  // chief, has the most to check).
  if (FLAGS_check_config && launched->empty() && FLAGS_index < 0 && FLAGS_task_index < 0 &&
      std::getenv("TF_CONFIG") == nullptr) {
    FLAGS_index = 0;
  }
  std::string how;
  const auto getenv = [](const char* name) { return std::getenv(name); };
  absl::StatusOr<Role> role = ResolveRole(
      binary_role, ClusterFlagsFromCommandLine(), std::getenv("TF_CONFIG"), config, *launched, &how,
      [&](const LaunchRank& rank, const ClusterConfig& cluster) { return LaunchedHostPorts(rank, cluster, getenv); });
  if (!role.ok()) {
    std::string message(role.status().message());
    if (message.find(FLAGS_config) == std::string::npos) message = FLAGS_config + ": " + message;
    Fail(message);
  }
  if (!launched->empty() && FLAGS_index < 0 && FLAGS_task_index < 0) {
    std::cout << "role: " << how << std::endl;
    const ClusterConfig& cluster = config->cluster();
    std::cout << "cluster: ps_hosts [" << absl::StrJoin(cluster.ps_hosts(), ", ") << "] worker_hosts ["
              << absl::StrJoin(cluster.worker_hosts(), ", ") << "]" << std::endl;
  }
  return *role;
}

// The flags that set config fields for this process: --restore,
// --listen_address, --ps_recover_seconds (before time dilation).
void ApplyConfigFlags(ExperimentConfig* config) {
  if (!FLAGS_restore.empty()) config->mutable_checkpoint()->set_restore(FLAGS_restore);
  if (FLAGS_ps_recover_seconds >= 0) {
    config->mutable_timeouts()->set_ps_recover_seconds(static_cast<float>(FLAGS_ps_recover_seconds));
  }
  if (!FLAGS_listen_address.empty()) config->mutable_cluster()->set_listen_address(FLAGS_listen_address);
}

// Time dilation (device emulated, emulation.time_scale k): every modelled
// time and link is k times slower, so every deadline is k times longer
// (the heartbeat interval stays: beats only come more often).
void DilateTimeouts(ExperimentConfig* config) {
  const double dilation = TimeDilation(*config);
  if (dilation <= 1) return;
  const float k = static_cast<float>(dilation);
  TimeoutConfig* t = config->mutable_timeouts();
  t->set_rpc_seconds(t->rpc_seconds() * k);
  t->set_sync_step_seconds(t->sync_step_seconds() * k);
  t->set_worker_lost_seconds(t->worker_lost_seconds() * k);
  t->set_startup_seconds(t->startup_seconds() * k);
  t->set_ps_recover_seconds(t->ps_recover_seconds() * k);
}

// The chief writes checkpoints and summaries: a directory it cannot write
// is a config matter, refused before anything starts.
void CheckChiefDirectories(const ExperimentConfig& config) {
  for (const auto& [field, dir] : {std::pair<std::string, std::string>("checkpoint.dir", config.checkpoint().dir()),
                                   {"summaries.dir", config.summaries().dir()}}) {
    if (dir.empty()) continue;
    if (absl::Status s = EnsureWritableDirectory(dir, field); !s.ok()) {
      Fail(FLAGS_config + ": " + std::string(s.message()));
    }
  }
}

// Checked by the config check already; loaded here for the transport.
TransportSecurity LoadSecurity(const ExperimentConfig& config) {
  absl::StatusOr<TransportSecurity> security = LoadTransportSecurity(config);
  if (!security.ok()) Fail(FLAGS_config + ": " + std::string(security.status().message()));
  return *std::move(security);
}

// --metrics_port, else the config's metrics_port plus this role's offset
// (RoleSetup::metrics_port); 0: none.
int MetricsPort(const ExperimentConfig& config, const Role& role) {
  if (FLAGS_metrics_port > 65535) Fail(absl::StrCat("--metrics_port ", FLAGS_metrics_port, ": not a port"));
  if (FLAGS_metrics_port >= 0) return FLAGS_metrics_port;
  if (config.metrics_port() <= 0) return 0;
  const int offset = role.kind == RoleKind::kPs ? role.index : config.cluster().ps_hosts_size() + role.index;
  const int port = config.metrics_port() + offset;
  if (port > 65535) {
    Fail(absl::StrCat(FLAGS_config, ": metrics_port ", config.metrics_port(), " + this role's offset ", offset,
                      " is past 65535"));
  }
  return port;
}

// --run_dir, created; or DefaultRunDir, created when something is written there.
std::string RunDir(const ExperimentConfig& config) {
  if (FLAGS_run_dir.empty()) return DefaultRunDir(config.name());
  std::error_code ec;
  std::filesystem::create_directories(FLAGS_run_dir, ec);
  if (ec) Fail("cannot create --run_dir " + FLAGS_run_dir + ": " + ec.message());
  return FLAGS_run_dir;
}

}  // namespace

RoleSetup InitRole(int* argc, char*** argv, RoleKind binary_role, const MachineCheck& machine_check) {
  TuneAllocatorForBulkTraffic();
  SetLockOrderCheckingFromEnvironment();
  const std::vector<std::string> original_args(*argv, *argv + *argc);
  ParseFlagsAndStartLogging(argc, argv);
  // Parse, then apply flags and TF_CONFIG, then validate the final picture.
  RoleSetup setup;
  setup.config = ReadConfigFlag();
  setup.role = ResolveProcessRole(binary_role, &setup.config);
  if (setup.role.kind != binary_role) {
    // One command started every role (mpirun -np P+W pstrain-worker ...):
    // this rank serves as the other job.
    Fail(FLAGS_config + ": " + RunOtherBinary(setup.role, setup.config.cluster(), original_args));
  }
  ApplyConfigFlags(&setup.config);
  // A PS links no data sources, so it does not insist on the data files.
  if (absl::Status s = ValidateExperimentConfig(setup.config, FLAGS_config); !s.ok()) Fail(std::string(s.message()));
  if (absl::Status s = CheckByteScale(setup.config, FLAGS_byte_scale); !s.ok()) {
    Fail(FLAGS_config + ": " + std::string(s.message()));
  }
  setup.byte_scale = FLAGS_byte_scale;
  DilateTimeouts(&setup.config);
  if (setup.role.kind == RoleKind::kWorker && setup.role.index == 0) CheckChiefDirectories(setup.config);
  setup.security = LoadSecurity(setup.config);
  if (machine_check) {
    if (absl::Status s = machine_check(setup.config); !s.ok()) Fail(FLAGS_config + ": " + std::string(s.message()));
  }
  if (FLAGS_check_config) {
    setup.check_only = true;
    std::cout << "config ok: " << FLAGS_config << " (" << RoleToString(setup.role) << ")" << std::endl;
    return setup;
  }
  setup.metrics_port = MetricsPort(setup.config, setup.role);
  setup.run_dir = RunDir(setup.config);
  return setup;
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> StartMetricsEndpoint(const RoleSetup& setup,
                                                                        const MetricRegistry* registry) {
  if (setup.metrics_port == 0) return std::unique_ptr<MetricsHttpServer>();
  const ClusterConfig& cluster = setup.config.cluster();
  const std::string& entry =
      setup.role.kind == RoleKind::kPs ? cluster.ps_hosts(setup.role.index) : cluster.worker_hosts(setup.role.index);
  absl::StatusOr<HostPort> own = ParseHostPort(entry);
  if (!own.ok()) return own.status();
  MetricsHttpServerOptions options;
  if (setup.config.security().metrics_require_token()) {
    options.authorize = [token = setup.security.token, refused = std::make_shared<RefusedPeerLog>()](
                            std::string_view authorization, const std::string& peer) {
      if (PresentsToken(authorization, token)) return true;
      refused->Refused(peer, "metrics endpoint: no or wrong bearer token (security.metrics_require_token)");
      return false;
    };
  }
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server = MetricsHttpServer::Start(
      ListenHost(cluster.listen_address(), *own), setup.metrics_port, registry, [] { return absl::OkStatus(); },
      options);
  if (server.ok()) {
    LOG(INFO) << RoleToString(setup.role) << ": /metrics and /healthz on port " << (*server)->port();
  }
  return server;
}

absl::StatusOr<std::unique_ptr<Transport>> CreateRoleTransport(const RoleSetup& setup) {
  TransportOptions options;
  options.max_message_bytes = setup.config.max_message_bytes();
  options.security = setup.security;
  return CreateTransport(setup.config.transport(), options);
}

}  // namespace pstrain
