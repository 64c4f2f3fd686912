// pstrain-compare: runs a matrix of experiment variants, one after another,
// through pstrain-launch and reports them side by side.
//
//   pstrain-compare MATRIX.yaml [--out DIR] [--bin_dir DIR] [--dry_run]
//                   [--timeout_s N] [--require_chart] [--gnuplot PATH]
//
// Writes OUT/<nn>-<slug>/config.yaml for every variant and validates them all
// before anything runs; then runs each with run dir OUT/<nn>-<slug>/, printing
// one status line per variant, and writes OUT/results.csv, OUT/results.md and
// (with gnuplot) OUT/chart.svg + OUT/chart.png; the markdown table goes to
// stdout at the end. Results are read from each run's result.json only.
//
// Exit codes: 0 every variant ran; 1 a variant failed (the others still run),
// or the chart failed under --require_chart; 2 bad matrix, config or flags
// (nothing ran); 128+N interrupted by signal N.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/metrics/result_json.h"
#include "tools/compare/chart.h"
#include "tools/compare/matrix.h"
#include "tools/compare/report.h"

DEFINE_string(out, "", "Output directory; default runs/compare-<matrix name>-<YYYYmmdd-HHMMSS>");
DEFINE_string(bin_dir, "",
              "Directory holding pstrain-launch (and the role binaries it starts); default: this "
              "executable's directory");
DEFINE_bool(dry_run, false, "Write and validate every variant's config.yaml, print the plan, run nothing");
DEFINE_int32(timeout_s, 0, "Deadline of each variant in seconds, passed to pstrain-launch --timeout_s; 0: none");
DEFINE_bool(require_chart, false,
            "Exit 1 when the chart cannot be drawn (e.g. gnuplot is missing); by default that is "
            "only a warning");
DEFINE_string(gnuplot, "gnuplot", "The gnuplot executable (a name looked up on PATH, or a path)");

namespace {

namespace fs = std::filesystem;
using pstrain::RunResult;
using namespace pstrain::compare;

// Signal state: the launcher child to forward signals to, and the first
// signal received.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;

void OnSignal(int signo) {
  if (g_signal == 0) g_signal = signo;
  if (g_child > 0) kill(static_cast<pid_t>(g_child), signo);
}

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  signal(SIGCHLD, SIG_DFL);
}

int Fail(int code, const std::string& message) {
  std::cout.flush();
  std::cerr << "compare: " << message << std::endl;
  return code;
}

std::string Now(const char* format) {
  char stamp[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), format, &tm);
  return stamp;
}

// The matrix name as a directory-name component.
std::string PathSafe(const std::string& name) {
  std::string out;
  for (const char c : name) {
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.') ? c : '-';
  }
  return out.empty() ? "matrix" : out;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
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

// Runs `launch config --run_dir run_dir [--timeout_s N]` with its output in
// run_dir/launch.log; returns its exit code (128+N if it died of signal N,
// -1 if it could not be started).
int RunLaunch(const std::string& launch, const std::string& config, const std::string& run_dir,
              const std::string& log_path) {
  std::vector<std::string> args = {launch, config, "--run_dir", run_dir};
  if (FLAGS_timeout_s > 0) {
    args.push_back("--timeout_s");
    args.push_back(absl::StrCat(FLAGS_timeout_s));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) {
    close(log);
    return -1;
  }
  if (pid == 0) {
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
  close(log);
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

std::string StatusLine(const VariantOutcome& outcome, double seconds) {
  if (!outcome.ok) {
    return absl::StrCat("FAILED (exit ", outcome.exit_code, "): ", outcome.error, "; logs in ", outcome.run_dir, "/");
  }
  const RunResult& r = *outcome.result;
  std::string line = absl::StrCat("ok  ", FormatRate(r.images_per_sec()), " ± ", FormatRate(r.images_per_sec_stddev()),
                                  " images/sec", absl::StrFormat(", final loss %.4f", r.final_loss()));
  if (r.has_test_accuracy()) absl::StrAppend(&line, absl::StrFormat(", test accuracy %.2f%%", r.test_accuracy() * 100));
  absl::StrAppend(&line, absl::StrFormat("  (%.1f s)", seconds));
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "MATRIX.yaml [--out DIR] [--bin_dir DIR] [--dry_run] [--timeout_s N] [--require_chart]\n"
      "Runs every variant of a comparison matrix through pstrain-launch and writes "
      "results.csv, results.md and chart.svg/chart.png (see docs/COMPARE.md).");
  gflags::ParseCommandLineFlags(&argc, &argv, /*remove_flags=*/true);
  if (argc != 2) {
    return Fail(2, absl::StrCat("expected exactly one MATRIX argument\nusage: ", argv[0], " ", gflags::ProgramUsage()));
  }
  if (FLAGS_timeout_s < 0) return Fail(2, "--timeout_s must be >= 0");
  const std::string matrix_path = argv[1];
  const auto started = std::chrono::steady_clock::now();
  const std::string started_text = Now("%Y-%m-%d %H:%M:%S");

  absl::StatusOr<Matrix> loaded = LoadMatrix(matrix_path);
  if (!loaded.ok()) return Fail(2, std::string(loaded.status().message()));
  Matrix matrix = *std::move(loaded);

  const std::string out_dir =
      !FLAGS_out.empty() ? FLAGS_out : absl::StrCat("runs/compare-", PathSafe(matrix.name), "-", Now("%Y%m%d-%H%M%S"));
  {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec || !fs::is_directory(out_dir)) {
      return Fail(
          2, absl::StrCat("cannot create output directory ", out_dir, ": ", ec ? ec.message() : "not a directory"));
    }
    // A copy of what was run, in its own format (matrix.yaml or matrix.pbtxt, ...).
    const std::string copy = absl::StrCat("matrix", fs::path(matrix_path).extension().string());
    fs::copy_file(matrix_path, fs::path(out_dir) / copy, fs::copy_options::overwrite_existing, ec);
  }
  if (absl::Status status = PrepareVariants(matrix, out_dir); !status.ok()) {
    return Fail(
        2, absl::StrCat(status.message(), "\nnothing was run; the merged configs are in ", out_dir, "/*/config.yaml"));
  }

  std::string bin_dir = FLAGS_bin_dir;
  if (bin_dir.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return Fail(2, "cannot find my own executable (/proc/self/exe); pass --bin_dir");
    bin_dir = self.parent_path().string();
  }
  const std::string launch = (fs::path(bin_dir) / "pstrain-launch").string();

  const int n = static_cast<int>(matrix.variants.size());
  const std::string& baseline_label = matrix.variants[matrix.baseline].label;
  std::cout << "compare: " << matrix.name << ": " << n << " variants from " << matrix_path << " (base "
            << matrix.base_path << ", baseline '" << baseline_label << "'); output in " << out_dir << std::endl;
  if (FLAGS_dry_run) {
    for (const Variant& v : matrix.variants) {
      const pstrain::ExperimentConfig& c = v.config;
      const int workers = c.cluster().worker_hosts_size();
      std::cout << absl::StrFormat("[%d/%d] %s: %s, %s, %d PS, %d worker%s -> %s\n", v.index + 1, n, v.label,
                                   c.variable_update(), c.consistency(), c.cluster().ps_hosts_size(), workers,
                                   workers == 1 ? "" : "s", v.config_path);
    }
    std::cout << "compare: dry run: every config is valid; nothing was run" << std::endl;
    return 0;
  }
  if (access(launch.c_str(), X_OK) != 0) {
    return Fail(2, absl::StrCat(launch, " is missing or not executable; build it or pass --bin_dir"));
  }

  InstallSignalHandlers();
  int label_width = 0;
  for (const Variant& v : matrix.variants) label_width = std::max(label_width, static_cast<int>(v.label.size()));
  std::vector<VariantOutcome> outcomes;
  for (const Variant& v : matrix.variants) {
    VariantOutcome outcome;
    outcome.label = v.label;
    outcome.run_dir = (fs::path(out_dir) / v.dir_name).string();
    if (g_signal != 0) {
      outcome.exit_code = -1;
      outcome.error = "not run: interrupted";
      outcomes.push_back(std::move(outcome));
      continue;
    }
    std::cout << absl::StrFormat("[%d/%d] %-*s ... ", v.index + 1, n, label_width, v.label) << std::flush;
    const auto begin = std::chrono::steady_clock::now();
    const std::string log_path = (fs::path(outcome.run_dir) / "launch.log").string();
    std::error_code ec;
    fs::remove(fs::path(outcome.run_dir) / "result.json", ec);  // Never report a stale one.
    outcome.exit_code = RunLaunch(launch, v.config_path, outcome.run_dir, log_path);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (outcome.exit_code == 0) {
      const std::string result_path = (fs::path(outcome.run_dir) / "result.json").string();
      absl::StatusOr<RunResult> result = pstrain::ReadResultJson(result_path);
      if (result.ok()) {
        outcome.ok = true;
        outcome.result = *std::move(result);
      } else {
        outcome.exit_code = 1;
        outcome.error = absl::StrCat("pstrain-launch exited 0 but ", result.status().message());
      }
    } else if (outcome.exit_code < 0) {
      outcome.error = absl::StrCat("could not start ", launch);
    } else {
      outcome.error = LaunchReason(log_path);
      if (outcome.error.empty()) outcome.error = absl::StrCat("pstrain-launch exited with code ", outcome.exit_code);
    }
    std::cout << StatusLine(outcome, seconds) << std::endl;
    outcomes.push_back(std::move(outcome));
    // Keep a partial results.csv current, so an interrupted comparison
    // leaves what it measured.
    (void)WriteText((fs::path(out_dir) / "results.csv").string(), FormatCsv(ComputeReport(outcomes, matrix.baseline)));
  }

  const std::vector<ReportRow> rows = ComputeReport(outcomes, matrix.baseline);
  int failed = 0;
  for (const ReportRow& row : rows) failed += !row.outcome.ok;

  // The chart first, so results.md knows whether to link it.
  ChartText chart_text;
  chart_text.title = absl::StrCat(matrix.name, ": training throughput per variant");
  const std::string common = CommonSettings(rows);
  chart_text.subtitle =
      absl::StrCat(common.empty() ? "" : absl::StrCat(common, "\n"),
                   "above each bar: images/sec and the speed-up over the baseline '", baseline_label, "'");
  const std::string gnuplot = FindGnuplot(FLAGS_gnuplot);
  const absl::Status chart_status = DrawChart(rows, chart_text, out_dir, gnuplot);

  ReportContext context;
  context.matrix_name = matrix.name;
  context.description = matrix.description;
  context.matrix_path = matrix_path;
  context.base_path = matrix.base_path;
  context.baseline_label = baseline_label;
  context.started = started_text;
  context.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  context.chart = chart_status.ok();
  const std::string csv_path = (fs::path(out_dir) / "results.csv").string();
  const std::string md_path = (fs::path(out_dir) / "results.md").string();
  if (absl::Status s = WriteText(csv_path, FormatCsv(rows)); !s.ok()) return Fail(1, std::string(s.message()));
  if (absl::Status s = WriteText(md_path, FormatMarkdownReport(rows, context)); !s.ok())
    return Fail(1, std::string(s.message()));

  std::cout << "\n" << FormatMarkdownTable(rows) << "\n";
  std::cout << absl::StrFormat("compare: %d of %d variants succeeded in %.0f s; %s, %s", n - failed, n,
                               context.total_seconds, md_path, csv_path);
  if (chart_status.ok()) {
    std::cout << ", " << (fs::path(out_dir) / "chart.png").string() << " (and chart.svg)";
  }
  std::cout << std::endl;
  if (!chart_status.ok()) {
    std::cerr << "compare: " << (FLAGS_require_chart ? "error" : "warning") << ": no chart: " << chart_status.message()
              << std::endl;
  }
  if (g_signal != 0) return 128 + g_signal;
  if (failed > 0) {
    std::cerr << "compare: " << failed << " variant" << (failed == 1 ? "" : "s") << " failed; see the logs named above"
              << std::endl;
    return 1;
  }
  if (!chart_status.ok() && FLAGS_require_chart) return 1;
  return 0;
}
