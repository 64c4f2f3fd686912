#include "tools/compare/variant_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/metrics/result_json.h"

namespace pstrain::compare {
namespace {

namespace fs = std::filesystem;

// Signal state: the launcher child to forward signals to, and the first
// signal received.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;

void OnSignal(int signo) {
  if (g_signal == 0) g_signal = signo;
  if (g_child > 0) kill(static_cast<pid_t>(g_child), signo);
}

// The launcher's last "launch: ..." line (its summary of what went wrong),
// for the status line and the error column. Results never come from here.
std::string LaunchReason(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string reason;
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "launch: ")) reason = line.substr(8);
  }
  // The status line names the run directory itself.
  if (const size_t logs = reason.rfind("; logs in "); logs != std::string::npos) reason.resize(logs);
  return reason;
}

// Forks `argv` in its own process group with stdout and stderr on `log` and
// stdin on /dev/null; the child's pid, or -1.
pid_t StartLauncher(std::vector<char*>& argv, int log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  // Its own process group: a Ctrl-C reaches the launcher once, forwarded by
  // OnSignal, not twice (a second signal makes it SIGKILL its roles).
  setpgid(0, 0);
  dup2(log, STDOUT_FILENO);
  dup2(log, STDERR_FILENO);
  const int null_in = open("/dev/null", O_RDONLY);
  if (null_in >= 0) dup2(null_in, STDIN_FILENO);
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// Waits for the launcher `pid`, forwarding signals to it meanwhile; its exit
// code (128+N if it died of signal N, -1 if waiting failed).
int WaitForLauncher(pid_t pid) {
  g_child = pid;
  if (g_signal != 0) kill(pid, g_signal);  // Arrived between fork and here.
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      g_child = 0;
      return -1;
    }
  }
  g_child = 0;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Runs `launch config --run_dir run_dir [--timeout_s N] [--byte_scale B]`
// with its output in `log_path`; returns its exit code (128+N if it died of
// signal N, -1 if it could not be started).
int RunLaunch(const RunSettings& settings, const Variant& variant, const std::string& run_dir,
              const std::string& log_path) {
  std::vector<std::string> args = {settings.launch, variant.config_path, "--run_dir", run_dir};
  if (settings.timeout_s > 0) {
    args.push_back("--timeout_s");
    args.push_back(absl::StrCat(settings.timeout_s));
  }
  if (settings.byte_scale != 1 && variant.config.device() == "emulated") {
    args.push_back("--byte_scale");
    args.push_back(absl::StrCat(settings.byte_scale));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return -1;
  const pid_t pid = StartLauncher(argv, log);
  close(log);
  return pid < 0 ? -1 : WaitForLauncher(pid);
}

// Fills `outcome` from how the launcher ended: the result, or why it failed.
void ReadOutcome(const RunSettings& settings, const std::string& log_path, VariantOutcome& outcome) {
  if (outcome.exit_code == 0) {
    const std::string result_path = (fs::path(outcome.run_dir) / "result.json").string();
    absl::StatusOr<RunResult> result = ReadResultJson(result_path);
    if (result.ok()) {
      outcome.ok = true;
      outcome.result = *std::move(result);
    } else {
      outcome.exit_code = 1;
      outcome.error = absl::StrCat("pstrain-launch exited 0 but ", result.status().message());
    }
  } else if (outcome.exit_code < 0) {
    outcome.error = absl::StrCat("could not start ", settings.launch);
  } else {
    outcome.error = LaunchReason(log_path);
    if (outcome.error.empty()) outcome.error = absl::StrCat("pstrain-launch exited with code ", outcome.exit_code);
  }
}

// Runs one variant in its run directory (`outcome.run_dir`), never
// reporting a stale result.json; the seconds it took.
double RunVariant(const RunSettings& settings, const Variant& variant, VariantOutcome& outcome) {
  const auto begin = std::chrono::steady_clock::now();
  const std::string log_path = (fs::path(outcome.run_dir) / "launch.log").string();
  std::error_code ec;
  fs::remove(fs::path(outcome.run_dir) / "result.json", ec);
  outcome.exit_code = RunLaunch(settings, variant, outcome.run_dir, log_path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ReadOutcome(settings, log_path, outcome);
  return seconds;
}

std::string StatusLine(const VariantOutcome& outcome, double seconds) {
  if (!outcome.ok) {
    return absl::StrCat("FAILED (exit ", outcome.exit_code, "): ", outcome.error, "; logs in ", outcome.run_dir, "/");
  }
  const RunResult& r = *outcome.result;
  std::string line = absl::StrCat("ok  ", FormatRate(r.images_per_sec()), " ± ", FormatRate(r.images_per_sec_stddev()),
                                  " images/sec", absl::StrFormat(", final loss %.4f", r.final_loss()));
  if (r.has_test_accuracy()) absl::StrAppend(&line, absl::StrFormat(", test accuracy %.2f%%", r.test_accuracy() * 100));
  if (r.has_test_auc()) absl::StrAppend(&line, absl::StrFormat(", test AUC %.4f", r.test_auc()));
  absl::StrAppend(&line, absl::StrFormat("  (%.1f s)", seconds));
  for (const std::string& warning : r.warnings()) absl::StrAppend(&line, "\n    ! ", warning);
  return line;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

}  // namespace

void InstallSignalForwarding() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGCHLD, SIG_DFL);
}

int ReceivedSignal() { return g_signal; }

std::vector<VariantOutcome> RunVariants(const Matrix& matrix, const RunSettings& settings, std::ostream& out) {
  const int n = static_cast<int>(matrix.variants.size());
  int label_width = 0;
  for (const Variant& v : matrix.variants) label_width = std::max(label_width, static_cast<int>(v.label.size()));
  std::vector<VariantOutcome> outcomes;
  for (const Variant& v : matrix.variants) {
    VariantOutcome outcome;
    outcome.label = v.label;
    outcome.run_dir = (fs::path(settings.out_dir) / v.dir_name).string();
    if (g_signal != 0) {
      outcome.exit_code = -1;
      outcome.error = "not run: interrupted";
      outcomes.push_back(std::move(outcome));
      continue;
    }
    out << absl::StrFormat("[%d/%d] %-*s ... ", v.index + 1, n, label_width, v.label) << std::flush;
    const double seconds = RunVariant(settings, v, outcome);
    out << StatusLine(outcome, seconds) << std::endl;
    outcomes.push_back(std::move(outcome));
    (void)WriteText((fs::path(settings.out_dir) / "results.csv").string(),
                    FormatCsv(ComputeReport(outcomes, matrix.baseline)));
  }
  return outcomes;
}

}  // namespace pstrain::compare
