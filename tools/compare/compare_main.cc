// pstrain-compare: runs a matrix of experiment variants, one after another,
// through pstrain-launch and reports them side by side.
//
//   pstrain-compare MATRIX.yaml [--out DIR] [--bin_dir DIR] [--dry_run]
//                   [--only REGEX] [--timeout_s N] [--byte_scale B] [--require_chart] [--gnuplot PATH]
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
#include <gflags/gflags.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/command_line/command_line.h"
#include "common/config/byte_scale.h"
#include "tools/compare/chart.h"
#include "tools/compare/matrix.h"
#include "tools/compare/report.h"
#include "tools/compare/tuner_summary.h"
#include "tools/compare/variant_runner.h"

DEFINE_string(out, "", "Output directory; default runs/compare-<matrix name>-<YYYYmmdd-HHMMSS>");
DEFINE_string(bin_dir, "",
              "Directory holding pstrain-launch (and the role binaries it starts); default: this "
              "executable's directory");
DEFINE_string(only, "",
              "Run only the variants whose label this regular expression matches in part (and the baselines they "
              "are measured against)");
DEFINE_bool(dry_run, false, "Write and validate every variant's config.yaml, print the plan, run nothing");
DEFINE_int32(timeout_s, 0, "Deadline of each variant in seconds, passed to pstrain-launch --timeout_s; 0: none");
DEFINE_double(byte_scale, 0,
              "The byte scale of the variants of device emulated, passed to pstrain-launch --byte_scale "
              "(docs/EMULATION.md, \"Byte scale\"); 0: the matrix's byte_scale");
DEFINE_bool(require_chart, false,
            "Exit 1 when the chart cannot be drawn (e.g. gnuplot is missing); by default that is "
            "only a warning");
DEFINE_string(gnuplot, "gnuplot", "The gnuplot executable (a name looked up on PATH, or a path)");

namespace {

namespace fs = std::filesystem;
using namespace pstrain::compare;

int Fail(int code, absl::string_view message) {
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

// When the comparison started, for its total time and results.md.
struct Started {
  std::chrono::steady_clock::time_point time = std::chrono::steady_clock::now();
  std::string text = Now("%Y-%m-%d %H:%M:%S");
};

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

// The MATRIX argument after the flags; InvalidArgument for a usage error.
absl::StatusOr<std::string> ParseArgs(int argc, char** argv) {
  pstrain::ParseCommandLine(
      {.program = "pstrain-compare",
       .usage = "MATRIX.yaml [--out DIR] [--dry_run] [--only REGEX] [--timeout_s N] [--byte_scale B] "
                "[--require_chart]\n"
                "Runs every variant of a comparison matrix through pstrain-launch and writes results.csv, "
                "results.md and\nchart.svg/chart.png (docs/COMPARE.md).",
       .own_files = {"compare_main"},
       .shows = nullptr},
      &argc, &argv);
  if (argc != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected exactly one MATRIX argument, got ", argc - 1, " (see --help)"));
  }
  if (FLAGS_timeout_s < 0) return absl::InvalidArgumentError("--timeout_s must be >= 0");
  if (FLAGS_byte_scale != 0 && !pstrain::ByteScaleInRange(FLAGS_byte_scale)) {
    return absl::InvalidArgumentError("--byte_scale must be 0 (the matrix's) or in [1, 1000]");
  }
  return std::string(argv[1]);
}

// --out or runs/compare-<matrix name>-<YYYYmmdd-HHMMSS>, created, with a copy
// of the matrix file in its own format (matrix.yaml, matrix.pbtxt, ...).
absl::StatusOr<std::string> MakeOutputDir(const Matrix& matrix) {
  const std::string out_dir =
      !FLAGS_out.empty() ? FLAGS_out : absl::StrCat("runs/compare-", PathSafe(matrix.name), "-", Now("%Y%m%d-%H%M%S"));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec || !fs::is_directory(out_dir)) {
    return absl::InternalError(
        absl::StrCat("cannot create output directory ", out_dir, ": ", ec ? ec.message() : "not a directory"));
  }
  const std::string copy = absl::StrCat("matrix", fs::path(matrix.path).extension().string());
  fs::copy_file(matrix.path, fs::path(out_dir) / copy, fs::copy_options::overwrite_existing, ec);
  return out_dir;
}

// <--bin_dir or this executable's directory>/pstrain-launch.
absl::StatusOr<std::string> LauncherPath() {
  std::string bin_dir = FLAGS_bin_dir;
  if (bin_dir.empty()) {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return absl::NotFoundError("cannot find my own executable (/proc/self/exe); pass --bin_dir");
    bin_dir = self.parent_path().string();
  }
  return (fs::path(bin_dir) / "pstrain-launch").string();
}

void PrintHeader(const Matrix& matrix, const std::string& out_dir) {
  std::cout << "compare: " << matrix.name << ": " << matrix.variants.size() << " variants from " << matrix.path
            << " (base " << matrix.base_path << ", baseline '" << matrix.variants[matrix.baseline].label
            << "'); output in " << out_dir << std::endl;
}

// --dry_run: what each variant would run, every config already valid.
void PrintDryRun(const Matrix& matrix) {
  const int n = static_cast<int>(matrix.variants.size());
  for (const Variant& v : matrix.variants) {
    const pstrain::ExperimentConfig& c = v.config;
    const int workers = c.cluster().worker_hosts_size();
    std::cout << absl::StrFormat("[%d/%d] %s: %s, %s, %d PS, %d worker%s -> %s\n", v.index + 1, n, v.label,
                                 c.variable_update(), c.consistency(), c.cluster().ps_hosts_size(), workers,
                                 workers == 1 ? "" : "s", v.config_path);
  }
  std::cout << "compare: dry run: every config is valid; nothing was run" << std::endl;
}

ChartText ChartTextFor(const Matrix& matrix, const std::vector<ReportRow>& rows) {
  ChartText text;
  text.title = absl::StrCat(matrix.name, ": training throughput per variant");
  const std::string common = CommonSettings(rows);
  text.subtitle = absl::StrCat(common.empty() ? "" : absl::StrCat(common, "\n"),
                               "above each bar: images/sec and the speed-up over the baseline '",
                               matrix.variants[matrix.baseline].label, "'");
  return text;
}

ReportContext ContextFor(const Matrix& matrix, const Started& started, bool chart) {
  ReportContext context;
  context.matrix_name = matrix.name;
  context.description = matrix.description;
  context.matrix_path = matrix.path;
  context.base_path = matrix.base_path;
  context.baseline_label = matrix.variants[matrix.baseline].label;
  context.started = started.text;
  context.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started.time).count();
  context.chart = chart;
  return context;
}

// The markdown table, then one line saying how many variants succeeded and
// where the report is, then (stderr) why there is no chart.
void PrintResults(const std::vector<ReportRow>& rows, const ReportContext& context, const std::string& out_dir,
                  const absl::Status& chart) {
  int failed = 0;
  for (const ReportRow& row : rows) failed += !row.outcome.ok;
  const int n = static_cast<int>(rows.size());
  std::cout << "\n" << FormatMarkdownTable(rows) << "\n";
  if (const std::string tuner = TunerSummary(rows); !tuner.empty()) std::cout << tuner << "\n";
  std::cout << absl::StrFormat("compare: %d of %d variants succeeded in %.0f s; %s, %s", n - failed, n,
                               context.total_seconds, (fs::path(out_dir) / "results.md").string(),
                               (fs::path(out_dir) / "results.csv").string());
  if (chart.ok()) std::cout << ", " << (fs::path(out_dir) / "chart.png").string() << " (and chart.svg)";
  std::cout << std::endl;
  if (!chart.ok()) {
    std::cerr << "compare: " << (FLAGS_require_chart ? "error" : "warning") << ": no chart: " << chart.message()
              << std::endl;
  }
}

// The comparison's exit code: 128+N when interrupted by signal N, 1 when a
// variant failed (saying so) or the chart under --require_chart, else 0.
int ExitCode(const std::vector<ReportRow>& rows, const absl::Status& chart) {
  int failed = 0;
  for (const ReportRow& row : rows) failed += !row.outcome.ok;
  if (ReceivedSignal() != 0) return 128 + ReceivedSignal();
  if (failed > 0) {
    std::cerr << "compare: " << failed << " variant" << (failed == 1 ? "" : "s") << " failed; see the logs named above"
              << std::endl;
    return 1;
  }
  if (!chart.ok() && FLAGS_require_chart) return 1;
  return 0;
}

// The chart (first, so results.md knows whether to link it), results.csv
// and results.md in `out_dir`, the table on stdout; the exit code.
int Report(const Matrix& matrix, const std::vector<VariantOutcome>& outcomes, const std::string& out_dir,
           const Started& started) {
  std::vector<int> baselines;
  for (const Variant& variant : matrix.variants) baselines.push_back(variant.baseline);
  const std::vector<ReportRow> rows = ComputeReport(outcomes, matrix.baseline, baselines);
  const absl::Status chart = DrawChart(rows, ChartTextFor(matrix, rows), out_dir, FindGnuplot(FLAGS_gnuplot));
  const ReportContext context = ContextFor(matrix, started, chart.ok());
  const std::string csv_path = (fs::path(out_dir) / "results.csv").string();
  const std::string md_path = (fs::path(out_dir) / "results.md").string();
  if (absl::Status s = WriteText(csv_path, FormatCsv(rows)); !s.ok()) return Fail(1, s.message());
  if (absl::Status s = WriteText(md_path, FormatMarkdownReport(rows, context)); !s.ok()) return Fail(1, s.message());
  PrintResults(rows, context, out_dir, chart);
  return ExitCode(rows, chart);
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<std::string> matrix_path = ParseArgs(argc, argv);
  if (!matrix_path.ok()) return Fail(2, matrix_path.status().message());
  const Started started;

  // Load, write and validate every variant's config: a bad one runs nothing.
  absl::StatusOr<Matrix> matrix = LoadMatrix(*matrix_path, FLAGS_only);
  if (!matrix.ok()) return Fail(2, matrix.status().message());
  absl::StatusOr<std::string> out_dir = MakeOutputDir(*matrix);
  if (!out_dir.ok()) return Fail(2, out_dir.status().message());
  if (absl::Status status = PrepareVariants(*matrix, *out_dir); !status.ok()) {
    return Fail(
        2, absl::StrCat(status.message(), "\nnothing was run; the merged configs are in ", *out_dir, "/*/config.yaml"));
  }
  absl::StatusOr<std::string> launch = LauncherPath();
  if (!launch.ok()) return Fail(2, launch.status().message());
  PrintHeader(*matrix, *out_dir);
  if (FLAGS_dry_run) {
    PrintDryRun(*matrix);
    return 0;
  }
  if (access(launch->c_str(), X_OK) != 0) {
    return Fail(2, absl::StrCat(*launch, " is missing or not executable; build it or pass --bin_dir"));
  }

  // Run every variant, then report them side by side.
  InstallSignalForwarding();
  const RunSettings settings{.launch = *launch,
                             .out_dir = *out_dir,
                             .timeout_s = FLAGS_timeout_s,
                             .byte_scale = FLAGS_byte_scale > 0 ? FLAGS_byte_scale : matrix->byte_scale};
  const std::vector<VariantOutcome> outcomes = RunVariants(*matrix, settings, std::cout);
  return Report(*matrix, outcomes, *out_dir, started);
}
