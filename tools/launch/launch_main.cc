// pstrain-launch: runs a whole experiment cluster on this machine.
//
//   pstrain-launch CONFIG [--run_dir DIR] [--bin_dir DIR] [--timeout_s N]
//                  [--grace_s N] [--check_timeout_s N] [--max_restarts N]
//                  [--check_config] [-- extra args passed to every role]
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
//
// main reads as those steps: launch_plan.h prepares everything before the
// first role starts, launch_report.h words what is printed.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/command_line/command_line.h"
#include "tools/launch/launch_plan.h"
#include "tools/launch/launch_report.h"
#include "tools/launch/link_schedule.h"
#include "tools/launch/process_group.h"

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
DEFINE_bool(check_config, false,
            "Check CONFIG as every role would on this machine (each role binary's --check_config: the config, "
            "a GPU for device gpu, mpirun for collective mpi), say so and exit 0 (or 2); start nothing");
DEFINE_int32(max_restarts, 0,
             "Times each role is started again after it dies or exits non-zero (not 2, a config error); "
             "workers rejoin, and with timeouts.ps_recover_seconds the chief restores a restarted PS shard "
             "from the last checkpoint (120 s when the config has a checkpoint.dir and leaves it unset)");
DEFINE_double(byte_scale, 1,
              "device emulated: every variable holds 1/b of the model's elements, links and in-host copies run "
              "b times slower, the layout's byte sizes are divided by b (docs/EMULATION.md, \"Byte scale\"): "
              "with emulation.time_scale k / b, as light on this machine as at k, b times sooner");

namespace {

using pstrain::launch::LaunchArgs;
using pstrain::launch::LaunchPlan;

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

// Ends the launch early with `status`'s message on stderr; its exit code.
int Fail(const absl::Status& status) {
  std::cout.flush();
  std::cerr << "launch: " << status.message() << std::endl;
  return pstrain::launch::ExitCodeOf(status);
}

// The flags, CONFIG and the role arguments after a literal "--" (which
// belong to the roles, not to gflags). InvalidArgument for a usage error.
absl::StatusOr<LaunchArgs> ParseArgs(int argc, char** argv) {
  std::vector<char*> own_args;
  LaunchArgs args;
  bool passthrough = false;
  for (int i = 0; i < argc; ++i) {
    if (passthrough) {
      args.role_args.push_back(argv[i]);
    } else if (i > 0 && std::strcmp(argv[i], "--") == 0) {
      passthrough = true;
    } else {
      own_args.push_back(argv[i]);
    }
  }
  int own_argc = static_cast<int>(own_args.size());
  own_args.push_back(nullptr);
  char** own_argv = own_args.data();
  pstrain::ParseCommandLine({.program = "pstrain-launch",
                             .usage = "CONFIG [--check_config] [--run_dir DIR] [--timeout_s N] [--max_restarts N] "
                                      "[-- extra role args]\n"
                                      "Checks CONFIG with every role binary (--check_config), then starts every PS and "
                                      "worker of its cluster on this machine\n(docs/CONFIG.md, \"pstrain-launch\").",
                             .own_files = {"launch_main"},
                             .shows = nullptr},
                            &own_argc, &own_argv);
  if (own_argc != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected exactly one CONFIG argument, got ", own_argc - 1, " (see --help)"));
  }
  args.config = own_argv[1];
  args.run_dir = FLAGS_run_dir;
  args.bin_dir = FLAGS_bin_dir;
  args.timeout_s = FLAGS_timeout_s;
  args.grace_s = FLAGS_grace_s;
  args.check_timeout_s = FLAGS_check_timeout_s;
  args.max_restarts = FLAGS_max_restarts;
  args.byte_scale = FLAGS_byte_scale;
  args.check_only = FLAGS_check_config;
  if (absl::Status status = pstrain::launch::ValidateLaunchArgs(args); !status.ok()) return status;
  return args;
}

// Starts the roles, supervises them to the end (process_group.h's policy)
// and says how it ended; the launcher's exit code.
int RunCluster(const LaunchPlan& plan) {
  pstrain::launch::ClusterProcesses cluster(plan.options);
  if (absl::Status status = cluster.Start(plan.roles); !status.ok()) {
    return Fail(absl::InternalError(status.message()));  // exit 1, whatever went wrong
  }
  std::unique_ptr<pstrain::launch::LinkSchedule> links;
  if (plan.addresses.emulated != nullptr && plan.experiment.emulation().link_changes_size() > 0) {
    links = std::make_unique<pstrain::launch::LinkSchedule>(
        plan.addresses.emulated.get(), pstrain::launch::LinkStepsOf(plan.experiment, plan.byte_scale), Print);
  }
  const pstrain::launch::ClusterOutcome outcome = cluster.Wait();
  links.reset();
  if (outcome.exit_code != 0) {
    Print(absl::StrCat("launch: failed: ", outcome.reason, "; logs in ", plan.run_dir));
    return outcome.exit_code;
  }
  const std::string result = (std::filesystem::path(plan.run_dir) / "result.json").string();
  // An mpirun role is its ranks.
  size_t roles = 0;
  for (const pstrain::launch::RoleSpec& role : plan.roles) roles += role.ranks > 0 ? role.ranks : 1;
  Print(absl::StrCat("launch: all ", roles, " roles finished",
                     plan.workers_under_mpirun ? " (the workers as the ranks of one mpirun)" : "",
                     "; result: ", result));
  std::cout << pstrain::launch::FormatSummary(plan.experiment, result, outcome) << std::flush;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<LaunchArgs> args = ParseArgs(argc, argv);
  if (!args.ok()) return Fail(args.status());
  // An inherited SIGCHLD=SIG_IGN would make the kernel reap the checks and
  // the roles for us and hide their exit codes.
  signal(SIGCHLD, SIG_DFL);

  // Read, place, check: nothing runs until every role binary accepts.
  absl::StatusOr<LaunchPlan> plan = pstrain::launch::PrepareLaunch(*args);
  if (!plan.ok()) return Fail(plan.status());
  if (args->check_only) {
    Print(absl::StrCat("launch: config ok: ", plan->config, " (the ", absl::StrJoin(plan->accepted_by, " and "),
                       " checks on this machine accept it); nothing started"));
    return 0;
  }
  plan->options.interrupt_fd = InstallSignalPipe();
  if (plan->options.interrupt_fd < 0) {
    return Fail(absl::InternalError(absl::StrCat("cannot create signal pipe: ", std::strerror(errno))));
  }
  std::cout << pstrain::launch::FormatPlan(*plan) << std::flush;
  return RunCluster(*plan);
}
