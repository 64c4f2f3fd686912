// pstrain-launch: runs a whole experiment cluster on this machine.
//
//   pstrain-launch CONFIG [--run_dir DIR] [--bin_dir DIR] [--timeout_s N]
//                  [--grace_s N] [--check_timeout_s N] [--max_restarts N]
//                  [-- extra args passed to every role]
//
// Reads CONFIG with the config library and checks its host lists
// (ValidateHosts), gives every role a free loopback port, then runs each role
// binary once with the arguments it will run with plus --check_config (the PS
// only when the cluster has one), so a config any role would refuse is refused
// before anything starts. Then starts <bin_dir>/pstrain-ps and
// <bin_dir>/pstrain-worker once per host, prefixes their output with the role
// name and supervises them (see process_group.h for the policy; with
// --max_restarts a failed role is started again up to N times). At the end
// it prints a summary of result.json (accuracy, images/sec, wall time,
// recoveries, where checkpoints, summaries and timelines are). Exit codes:
// 0 success, 1 a role failed or the run timed out, 2 bad config (here, in a
// role's check, or in a role), 128+N on signal N.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/config/cluster.h"
#include "common/config/config_loader.h"
#include "common/config/time_dilation.h"
#include "common/metrics/result_json.h"
#include "tools/launch/emulated_cluster.h"
#include "tools/launch/free_ports.h"
#include "tools/launch/mpirun.h"
#include "tools/launch/process_group.h"
#include "tools/launch/role_check.h"

DEFINE_string(run_dir, "",
              "Run directory for logs and result.json; default runs/<config "
              "stem>-<YYYYmmdd-HHMMSS>");
DEFINE_string(bin_dir, "",
              "Directory holding pstrain-ps and pstrain-worker; default: this "
              "executable's directory");
DEFINE_int32(timeout_s, 0, "Overall deadline in seconds; 0: none");
DEFINE_int32(grace_s, 5, "Seconds between SIGTERM and SIGKILL, and that PS may outlive the workers");
DEFINE_int32(check_timeout_s, 30,
             "Deadline in seconds of each role binary's --check_config run, "
             "before anything starts");
DEFINE_int32(max_restarts, 0,
             "Times each role is started again after it dies or exits non-zero (not 2, a config error); "
             "workers rejoin, and with timeouts.ps_recover_seconds the chief restores a restarted PS shard "
             "from the last checkpoint");

namespace {

namespace fs = std::filesystem;
using pstrain::launch::ClusterOptions;
using pstrain::launch::ClusterProcesses;
using pstrain::launch::RoleSpec;

// The one piece of global state: the write end of the self-pipe the signal
// handler wakes the supervision loop through.
int g_signal_pipe_write = -1;

void OnSignal(int signo) {
  const int saved_errno = errno;
  const unsigned char byte = static_cast<unsigned char>(signo);
  (void)!write(g_signal_pipe_write, &byte, 1);
  errno = saved_errno;
}

// Returns the read end of the self-pipe, or -1.
int InstallSignalPipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return -1;
  g_signal_pipe_write = fds[1];
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return fds[0];
}

void Print(const std::string& line) { std::cout << line << std::endl; }

int Fail(int code, const std::string& message) {
  std::cout.flush();
  std::cerr << "launch: " << message << std::endl;
  return code;
}

// runs/<config stem>-<YYYYmmdd-HHMMSS>.
std::string DefaultRunDir(const std::string& config) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return absl::StrCat("runs/", fs::path(config).stem().string(), "-", stamp);
}

std::string HostList(const std::vector<int>& ports, size_t begin, size_t count) {
  std::vector<std::string> hosts;
  for (size_t i = begin; i < begin + count; ++i) hosts.push_back(absl::StrCat("127.0.0.1:", ports[i]));
  return absl::StrJoin(hosts, ",");
}

// The end of a successful run in a few lines instead of result.json's JSON.
void PrintSummary(const pstrain::ExperimentConfig& config, const std::string& result_path,
                  const pstrain::launch::ClusterOutcome& outcome) {
  std::vector<std::string> restarts;
  for (const pstrain::launch::RoleExit& exit : outcome.exits) {
    if (exit.restarts > 0) restarts.push_back(absl::StrCat(exit.name, " ", exit.restarts, "x"));
  }
  if (!restarts.empty()) Print(absl::StrCat("launch: restarted: ", absl::StrJoin(restarts, ", ")));
  absl::StatusOr<pstrain::RunResult> result = pstrain::ReadResultJson(result_path);
  if (!result.ok()) {
    // Not one this pstrain wrote: show it as it is.
    Print(absl::StrCat("launch: no summary (", result.status().message(), "); result.json:"));
    if (std::ifstream in(result_path); in) std::cout << in.rdbuf() << std::flush;
    return;
  }
  std::string line = "launch: summary:";
  if (result->has_test_accuracy())
    absl::StrAppend(&line, absl::StrFormat(" test accuracy %.4f |", result->test_accuracy()));
  absl::StrAppend(&line, absl::StrFormat(" %.1f images/sec (%d workers x %d devices) | final loss %.4f | %.1f s",
                                         result->images_per_sec(), result->num_workers(), result->devices_per_worker(),
                                         result->final_loss(), result->wall_seconds()));
  Print(line);
  for (const pstrain::Recovery& recovery : result->recoveries()) {
    Print(absl::StrCat("launch: recovered: restored step ", recovery.restored_step(), " after: ", recovery.failure()));
  }
  std::vector<std::string> outputs;
  if (!config.checkpoint().dir().empty()) outputs.push_back(absl::StrCat("checkpoints ", config.checkpoint().dir()));
  if (!config.summaries().dir().empty()) outputs.push_back(absl::StrCat("summaries ", config.summaries().dir()));
  if (!config.timeline().path().empty()) outputs.push_back(absl::StrCat("timeline ", config.timeline().path()));
  if (!outputs.empty()) Print(absl::StrCat("launch: ", absl::StrJoin(outputs, "; ")));
}

}  // namespace

int main(int argc, char** argv) {
  // Everything after a literal "--" belongs to the roles, not to gflags.
  std::vector<char*> own_args;
  std::vector<std::string> extra_args;
  bool passthrough = false;
  for (int i = 0; i < argc; ++i) {
    if (passthrough) {
      extra_args.push_back(argv[i]);
    } else if (i > 0 && std::strcmp(argv[i], "--") == 0) {
      passthrough = true;
    } else {
      own_args.push_back(argv[i]);
    }
  }
  int own_argc = static_cast<int>(own_args.size());
  own_args.push_back(nullptr);
  char** own_argv = own_args.data();
  gflags::SetUsageMessage(
      "CONFIG [--run_dir DIR] [--bin_dir DIR] [--timeout_s N] [--grace_s N] "
      "[--check_timeout_s N] [--max_restarts N] [-- extra role args]\n"
      "Checks CONFIG with every role binary (--check_config), then starts every PS "
      "and worker of its cluster on this machine.");
  gflags::ParseCommandLineFlags(&own_argc, &own_argv, /*remove_flags=*/true);
  if (own_argc != 2) {
    return Fail(2, absl::StrCat("expected exactly one CONFIG argument\nusage: ", argv[0], " ", gflags::ProgramUsage()));
  }
  const std::string config = own_argv[1];
  if (FLAGS_timeout_s < 0 || FLAGS_grace_s < 0) return Fail(2, "--timeout_s and --grace_s must be >= 0");
  if (FLAGS_check_timeout_s <= 0) return Fail(2, "--check_timeout_s must be > 0");
  if (FLAGS_max_restarts < 0) return Fail(2, "--max_restarts must be >= 0");
  // An inherited SIGCHLD=SIG_IGN would make the kernel reap the checks and
  // the roles for us and hide their exit codes.
  signal(SIGCHLD, SIG_DFL);

  // The config as every role reads it; its host lists must be valid although
  // the roles get loopback ports instead: each role checks them too.
  absl::StatusOr<pstrain::ExperimentConfig> experiment = pstrain::ReadExperimentConfig(config);
  if (!experiment.ok()) return Fail(2, std::string(experiment.status().message()));
  if (absl::Status status = pstrain::ValidateHosts(experiment->cluster(), config); !status.ok()) {
    return Fail(2, std::string(status.message()));
  }

  std::string bin_dir = FLAGS_bin_dir;
  if (bin_dir.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return Fail(1, absl::StrCat("cannot find my own executable (/proc/self/exe): ", ec.message()));
    bin_dir = self.parent_path().string();
  }
  const std::string run_dir = FLAGS_run_dir.empty() ? DefaultRunDir(config) : FLAGS_run_dir;

  const int num_ps = experiment->cluster().ps_hosts_size();
  const int num_workers = experiment->cluster().worker_hosts_size();
  std::string ps_hosts, worker_hosts;
  // emulation: every role on its emulated host, the hosts' links capped.
  std::unique_ptr<pstrain::launch::EmulatedCluster> emulated;
  if (experiment->has_emulation()) {
    const pstrain::EmulationConfig& e = experiment->emulation();
    pstrain::launch::EmulatedLayout layout;
    layout.num_ps = num_ps;
    layout.num_workers = num_workers;
    layout.workers_per_host = std::max(1, e.workers_per_host());
    layout.ps_on_separate_hosts = e.ps_placement() != "colocated";
    // Time dilation slows the links as it slows the devices.
    layout.link_gbps = e.link_gbps() / pstrain::TimeDilation(*experiment);
    layout.port = experiment->cluster().port();
    // A /24 of 10.0.0.0/8 per launcher: concurrent launches do not collide.
    // Create says why this machine cannot emulate (no root, no ip): exit 2.
    const int subnet = (216 + getpid() % 32) * 256 + (getpid() / 32) % 256;
    absl::StatusOr<std::unique_ptr<pstrain::launch::EmulatedCluster>> made =
        pstrain::launch::EmulatedCluster::Create(layout, subnet);
    if (!made.ok()) {
      return Fail(made.status().code() == absl::StatusCode::kFailedPrecondition ? 2 : 1,
                  absl::StrCat(config, ": emulation: ", made.status().message(), "; nothing was started"));
    }
    emulated = *std::move(made);
    ps_hosts = emulated->ps_hosts();
    worker_hosts = emulated->worker_hosts();
  } else {
    absl::StatusOr<std::vector<int>> ports = pstrain::launch::PickFreeLoopbackPorts(num_ps + num_workers);
    if (!ports.ok()) return Fail(1, std::string(ports.status().message()));
    ps_hosts = HostList(*ports, 0, num_ps);
    worker_hosts = HostList(*ports, num_ps, num_workers);
  }

  // A role's arguments; the check adds --check_config before the extra args.
  auto role_args = [&](int index, bool check) {
    std::vector<std::string> args = {
        absl::StrCat("--config=", config), absl::StrCat("--index=", index), absl::StrCat("--ps_hosts=", ps_hosts),
        absl::StrCat("--worker_hosts=", worker_hosts), absl::StrCat("--run_dir=", run_dir)};
    if (check) args.push_back(pstrain::launch::kCheckConfigFlag);
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return args;
  };
  std::vector<RoleSpec> roles;
  auto add_role = [&](const char* kind, const char* binary, int index, bool is_ps) {
    RoleSpec role;
    role.name = absl::StrCat(kind, index);
    role.is_ps = is_ps;
    role.binary = (fs::path(bin_dir) / binary).string();
    role.args = role_args(index, /*check=*/false);
    if (emulated != nullptr) {  // ip netns exec <its host> binary args...
      std::vector<std::string> argv = is_ps ? emulated->RunPs(index) : emulated->RunWorker(index);
      argv.push_back(role.binary);
      argv.insert(argv.end(), role.args.begin(), role.args.end());
      role.binary = argv[0];
      role.args.assign(argv.begin() + 1, argv.end());
    }
    roles.push_back(std::move(role));
  };
  // The workers share this machine's cores: unless the user chose, give each
  // worker's oneDNN/OpenMP runtime an equal share instead of every core.
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
    const long share = std::max(1L, cores / std::max(1, num_workers));
    setenv("OMP_NUM_THREADS", std::to_string(share).c_str(), 1);
  }
  // All roles share these cores: OpenMP threads that spin while waiting would
  // steal them from the PS and the other workers.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  for (int i = 0; i < num_ps; ++i) add_role("ps", "pstrain-ps", i, true);
  for (int i = 0; i < num_workers; ++i) add_role("worker", "pstrain-worker", i, false);

  // Every distinct role binary validates the config as it will run it (index
  // 0 stands for all of its job); the first refusal stops everything.
  std::vector<std::string> checked;
  bool workers_need_mpirun = false;
  struct Check {
    const char* kind;
    const char* binary;
    int count;
  };
  for (const Check& check : {Check{"ps", "pstrain-ps", num_ps}, Check{"worker", "pstrain-worker", num_workers}}) {
    if (check.count == 0) continue;
    const absl::StatusOr<std::vector<std::string>> needs =
        pstrain::launch::CheckRoleConfig(check.kind, (fs::path(bin_dir) / check.binary).string(),
                                         role_args(0, /*check=*/true), absl::Seconds(FLAGS_check_timeout_s));
    if (!needs.ok()) {
      return Fail(needs.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1,
                  absl::StrCat(needs.status().message(), "; nothing was started"));
    }
    checked.push_back(check.kind);
    for (const std::string& need : *needs) {
      if (need == pstrain::launch::kNeedsMpirun && std::string(check.kind) == "worker") workers_need_mpirun = true;
    }
  }
  // Workers that must be the ranks of one mpirun (collective mpi) run as one
  // role: mpirun with a rank per worker, each taking its index from its rank.
  if (workers_need_mpirun && emulated != nullptr) {
    return Fail(2, absl::StrCat(config,
                                ": emulation: workers that run as the ranks of one mpirun (collective mpi) "
                                "cannot be placed on emulated hosts yet; use collective gloo; nothing was "
                                "started"));
  }
  if (workers_need_mpirun) {
    absl::StatusOr<RoleSpec> mpirun =
        pstrain::launch::MpirunRole(num_workers, (fs::path(bin_dir) / "pstrain-worker").string(), [&] {
          std::vector<std::string> args = role_args(0, /*check=*/false);
          args.erase(args.begin() + 1);  // --index: each rank takes its own from mpirun
          return args;
        }());
    if (!mpirun.ok()) return Fail(1, absl::StrCat(mpirun.status().message(), "; nothing was started"));
    roles.resize(num_ps);  // the PS roles stay as they are
    roles.push_back(*std::move(mpirun));
    Print(absl::StrCat("launch: the ", num_workers, " workers run as the ranks of one mpirun (collective mpi)"));
  }

  {
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    if (ec || !fs::is_directory(run_dir)) {
      return Fail(1,
                  absl::StrCat("cannot create run directory ", run_dir, ": ", ec ? ec.message() : "not a directory"));
    }
  }

  ClusterOptions options;
  options.log_dir = run_dir;
  options.grace = absl::Seconds(FLAGS_grace_s);
  // Time dilation slows every exchange, the last ones before a PS exits too.
  options.grace *= pstrain::TimeDilation(*experiment);
  options.timeout = absl::Seconds(FLAGS_timeout_s);
  options.max_restarts = FLAGS_max_restarts;
  options.interrupt_fd = InstallSignalPipe();
  if (options.interrupt_fd < 0) return Fail(1, absl::StrCat("cannot create signal pipe: ", std::strerror(errno)));

  Print(absl::StrCat("launch: ", num_ps, " PS and ", num_workers, " workers from ", config, "; run dir ", run_dir));
  Print(absl::StrCat("launch: the config is accepted by ", absl::StrJoin(checked, " and "), " (",
                     pstrain::launch::kCheckConfigFlag, ")"));
  if (emulated != nullptr) Print(absl::StrCat("launch: emulation: ", emulated->Describe()));
  Print(absl::StrCat("launch: --ps_hosts=", ps_hosts, " --worker_hosts=", worker_hosts));
  if (FLAGS_max_restarts > 0) {
    Print(absl::StrCat("launch: a role that fails is restarted up to ", FLAGS_max_restarts, " time",
                       FLAGS_max_restarts == 1 ? "" : "s",
                       num_ps > 0 && experiment->timeouts().ps_recover_seconds() <= 0
                           ? " (timeouts.ps_recover_seconds is 0: a restarted PS shard still ends the run)"
                           : ""));
  }
  ClusterProcesses cluster(options);
  if (absl::Status status = cluster.Start(roles); !status.ok()) {
    return Fail(1, std::string(status.message()));
  }
  const pstrain::launch::ClusterOutcome outcome = cluster.Wait();
  if (outcome.exit_code != 0) {
    Print(absl::StrCat("launch: failed: ", outcome.reason, "; logs in ", run_dir));
    return outcome.exit_code;
  }
  const std::string result = (fs::path(run_dir) / "result.json").string();
  Print(absl::StrCat("launch: all ", roles.size(), " roles finished; result: ", result));
  PrintSummary(*experiment, result, outcome);
  return 0;
}
