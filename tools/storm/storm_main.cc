// pstrain-storm: a fault storm on one run (docs/ELASTIC.md, "Fault storms").
//
//   pstrain-storm CONFIG --run_dir DIR [--seed N] [--events N] [--every_s S]
//                 [--start_s S] [--faults kill_worker,pause_worker,kill_ps]
//                 [--timeout_s N] [--bin_dir DIR]
//
// Starts `pstrain-launch CONFIG --run_dir DIR --max_restarts <events>`,
// echoes its output, and faults the roles on a seeded schedule
// (tools/storm/storm_plan.h): kill -9 of a worker (the launcher starts it
// again and it rejoins), SIGSTOP of a worker for 2..6 s, kill -9 of a PS
// shard (started again: the PS recovery); the chief and PS shard 0 are never
// faulted. At the end it reads DIR/result.json and prints each fault with
// its recovery time (tools/storm/storm_recovery.h), their p50 and p99, the
// training time ratio, the test accuracy and whether the data ledger shows
// every example once; DIR/storm.json holds the same.
//
// Exit codes: 0 the run finished (the launcher exited 0) with every
// example trained once (when it keeps a ledger); 1 otherwise; 2 bad flags
// or config.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/command_line/command_line.h"
#include "common/config/config_loader.h"
#include "common/metrics/result_json.h"
#include "tools/launch/child_exec.h"
#include "tools/launch/find_processes.h"
#include "tools/storm/storm_plan.h"
#include "tools/storm/storm_recovery.h"

DEFINE_string(run_dir, "", "The run's directory (required): result.json and storm.json land there");
DEFINE_uint64(seed, 1, "The storm's seed: the same seed, the same faults at the same moments");
DEFINE_int32(events, 30, "Faults in the storm");
DEFINE_double(every_s, 20, "Mean seconds between faults");
DEFINE_double(start_s, 20, "Seconds after the launch before the first fault may land");
DEFINE_string(faults, "kill_worker,pause_worker", "The kinds of fault: kill_worker, pause_worker, kill_ps");
DEFINE_int32(timeout_s, 3600, "Deadline of the whole run, passed to pstrain-launch --timeout_s");
DEFINE_string(bin_dir, "", "Directory holding pstrain-launch; default: this executable's directory");

namespace pstrain::storm {
namespace {

// The launcher's output as it comes: echoed, the chief's progress kept.
class LaunchOutput {
 public:
  void Read(int fd) {
    std::string pending;
    char buffer[65536];
    for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) {
      pending.append(buffer, n);
      for (size_t end; (end = pending.find('\n')) != std::string::npos; pending.erase(0, end + 1)) {
        const std::string line = pending.substr(0, end);
        std::cout << line << '\n';
        if (std::optional<int64_t> step = ChiefStep(line)) {
          std::lock_guard<std::mutex> lock(mu_);
          progress_.push_back({absl::Now(), *step});
        }
      }
      std::cout.flush();
    }
  }
  std::vector<ProgressSample> progress() {
    std::lock_guard<std::mutex> lock(mu_);
    return progress_;
  }

 private:
  std::mutex mu_;
  std::vector<ProgressSample> progress_;
};

std::string ExecutableDir() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return ".";
  const std::string path(self, n);
  return path.substr(0, path.rfind('/'));
}

struct Launched {
  pid_t pid = -1;
  int out = -1;
};

absl::StatusOr<Launched> StartLauncher(const std::string& config, int max_restarts) {
  const std::string bin = FLAGS_bin_dir.empty() ? ExecutableDir() : FLAGS_bin_dir;
  const std::string path = bin + "/pstrain-launch";
  std::vector<std::string> args = {path,
                                   config,
                                   "--run_dir",
                                   FLAGS_run_dir,
                                   "--max_restarts",
                                   absl::StrCat(max_restarts),
                                   "--timeout_s",
                                   absl::StrCat(FLAGS_timeout_s)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) launch::ExecChild(path.c_str(), argv.data(), pipe_fds[1], null_fd, parent);
  close(pipe_fds[1]);
  close(null_fd);
  return Launched{pid, pipe_fds[0]};
}

// The process of the fault's role; -1 when none runs now (being restarted),
// after waiting up to 2 s for it.
pid_t RoleProcess(const Fault& fault) {
  const std::string binary = fault.kind == FaultKind::kKillPs ? "pstrain-ps" : "pstrain-worker";
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  do {
    std::vector<pid_t> pids =
        launch::FindProcesses({binary, absl::StrCat("--index=", fault.target, " "), FLAGS_run_dir});
    if (pids.size() == 1) return pids[0];
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < deadline);
  return -1;
}

// What happened to each fault.
struct Applied {
  absl::Time at;
  bool done = false;
  std::string note;
};

// Applies the storm's faults on time until the launcher exits; pauses end
// on threads of their own (joined before returning).
std::vector<Applied> RunStorm(const std::vector<Fault>& faults, absl::Time start, const std::atomic<bool>& over) {
  std::vector<Applied> applied;
  std::vector<std::thread> resumes;
  for (const Fault& f : faults) {
    while (absl::Now() < start + f.at && !over) absl::SleepFor(absl::Milliseconds(20));
    if (over) break;
    Applied a{absl::Now(), false, ""};
    const pid_t pid = RoleProcess(f);
    if (pid < 0) {
      a.note = "no process to fault (it was being started again)";
    } else if (f.kind == FaultKind::kPauseWorker) {
      a.done = kill(pid, SIGSTOP) == 0;
      resumes.emplace_back([pid, pause = f.pause] {
        absl::SleepFor(pause);
        kill(pid, SIGCONT);
      });
      a.note = absl::StrFormat("pid %d stopped for %.1f s", pid, absl::ToDoubleSeconds(f.pause));
    } else {
      a.done = kill(pid, SIGKILL) == 0;
      a.note = absl::StrCat("pid ", pid, " killed");
    }
    std::cout << "storm: " << FaultName(f.kind) << " " << f.target << ": " << a.note << std::endl;
    applied.push_back(a);
  }
  for (std::thread& t : resumes) t.join();
  return applied;
}

// Every epoch of the ledger trained once ("" when so, else what is off).
std::string LedgerProblem(const RunResult& result) {
  if (!result.has_data_ledger()) return "";
  const LedgerReport& l = result.data_ledger();
  std::vector<std::string> off;
  for (int e = 0; e < l.examples_done_size(); ++e) {
    const int64_t planned = std::min(l.examples_per_epoch(), l.total_examples() - int64_t{e} * l.examples_per_epoch());
    if (l.examples_done(e) != planned) {
      off.push_back(absl::StrCat("epoch ", e, ": ", l.examples_done(e), " of ", planned));
    }
  }
  return absl::StrJoin(off, "; ");
}

// The report: each fault with its recovery, the quantiles, the run's ratio,
// accuracy and ledger; printed and written to storm.json. Returns whether
// the ledger shows every example once.
bool Report(const std::vector<Fault>& faults, const std::vector<Applied>& applied,
            const std::vector<std::optional<double>>& recovery, const absl::StatusOr<RunResult>& result) {
  std::vector<double> seconds;
  std::vector<std::string> rows;
  for (size_t i = 0; i < applied.size(); ++i) {
    const std::string r = recovery[i] ? absl::StrFormat("%.2f", *recovery[i]) : "null";
    if (recovery[i]) seconds.push_back(*recovery[i]);
    std::cout << absl::StrFormat("storm: fault %2d at %6.1f s: %-12s %d: recovered in %s s (%s)", i,
                                 absl::ToDoubleSeconds(faults[i].at), FaultName(faults[i].kind), faults[i].target, r,
                                 applied[i].note)
              << std::endl;
    rows.push_back(
        absl::StrFormat(R"({"at_seconds": %.2f, "fault": "%s", "target": %d, "applied": %s, "recovery_seconds": %s})",
                        absl::ToDoubleSeconds(faults[i].at), FaultName(faults[i].kind), faults[i].target,
                        applied[i].done ? "true" : "false", r));
  }
  const double p50 = Quantile(seconds, 0.5), p99 = Quantile(seconds, 0.99);
  const std::string ledger = result.ok() ? LedgerProblem(*result) : "no result.json";
  const double ratio = result.ok() ? result->training_time_ratio() : 0;
  const double accuracy = result.ok() && result->has_test_accuracy() ? result->test_accuracy() : 0;
  std::cout << absl::StrFormat(
                   "storm: %d faults applied of %d; recovery p50 %.2f s, p99 %.2f s (%d recovered); training time "
                   "ratio %.3f; test accuracy %.4f; data ledger: %s",
                   std::count_if(applied.begin(), applied.end(), [](const Applied& a) { return a.done; }),
                   faults.size(), p50, p99, seconds.size(), ratio, accuracy,
                   ledger.empty() ? "every example once" : ledger)
            << std::endl;
  std::ofstream(FLAGS_run_dir + "/storm.json") << absl::StrFormat(
      "{\n  \"seed\": %d,\n  \"faults\": [\n    %s\n  ],\n  \"recovery_p50_seconds\": %.3f,\n"
      "  \"recovery_p99_seconds\": %.3f,\n  \"training_time_ratio\": %.4f,\n  \"test_accuracy\": %.4f,\n"
      "  \"ledger_problem\": \"%s\"\n}\n",
      FLAGS_seed, absl::StrJoin(rows, ",\n    "), p50, p99, ratio, accuracy, ledger);
  return ledger.empty();
}

absl::StatusOr<std::vector<Fault>> Plan(const ExperimentConfig& config) {
  StormOptions options;
  options.seed = FLAGS_seed;
  options.events = FLAGS_events;
  options.start = absl::Seconds(FLAGS_start_s);
  options.every = absl::Seconds(FLAGS_every_s);
  options.kinds.clear();
  for (absl::string_view name : absl::StrSplit(FLAGS_faults, ',', absl::SkipEmpty())) {
    absl::StatusOr<FaultKind> kind = ParseFault(std::string(name));
    if (!kind.ok()) return kind.status();
    options.kinds.push_back(*kind);
  }
  options.workers = config.cluster().worker_hosts_size();
  options.ps = config.cluster().ps_hosts_size();
  return PlanStorm(options);
}

int Main(int argc, char** argv) {
  ParseCommandLine({.program = "pstrain-storm",
                    .usage = "CONFIG --run_dir DIR [--seed N] [--events N] [--every_s S] [--faults KINDS]\n"
                             "A seeded fault storm on one pstrain-launch run (docs/ELASTIC.md, \"Fault storms\").",
                    .own_files = {"storm_main"},
                    .shows = nullptr},
                   &argc, &argv);
  absl::StatusOr<ExperimentConfig> config =
      argc == 2 ? LoadExperimentConfig(argv[1]) : absl::InvalidArgumentError("expected one CONFIG argument");
  absl::StatusOr<std::vector<Fault>> faults = config.ok() ? Plan(*config) : config.status();
  if (faults.ok() && FLAGS_run_dir.empty()) faults = absl::InvalidArgumentError("--run_dir is required");
  if (!faults.ok()) {
    std::cerr << "storm: " << faults.status().message() << std::endl;
    return kExitBadFlag;
  }
  absl::StatusOr<Launched> launched = StartLauncher(argv[1], FLAGS_events + 1);
  if (!launched.ok()) {
    std::cerr << "storm: " << launched.status().message() << std::endl;
    return 1;
  }
  const absl::Time start = absl::Now();
  LaunchOutput output;
  std::thread reader([&] { output.Read(launched->out); });
  std::atomic<bool> over = false;
  int status = 0;
  std::thread waiter([&] {
    waitpid(launched->pid, &status, 0);
    over = true;
  });
  const std::vector<Applied> applied = RunStorm(*faults, start, over);
  waiter.join();
  reader.join();
  std::vector<absl::Time> times;
  for (const Applied& a : applied) times.push_back(a.at);
  const int64_t advance = 2 * std::max<int64_t>(1, config->train().display_every());
  const bool ledger_ok = Report(*faults, applied, RecoverySeconds(times, output.progress(), advance),
                                ReadResultJson(FLAGS_run_dir + "/result.json"));
  const bool finished = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!finished)
    std::cout << "storm: the run did not finish (pstrain-launch exit status " << status << ")" << std::endl;
  return finished && ledger_ok ? 0 : 1;
}

}  // namespace
}  // namespace pstrain::storm

int main(int argc, char** argv) { return pstrain::storm::Main(argc, argv); }
