#include "tools/compare/chart.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace pstrain::compare {
namespace {

namespace fs = std::filesystem;

// Okabe-Ito-like colours, distinguishable for colour-blind readers; the
// last is for failed variants.
constexpr const char* kColours[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                    "#56B4E9", "#D55E00", "#F0E442", "#000000"};
constexpr int kNumColours = sizeof(kColours) / sizeof(kColours[0]);
constexpr const char* kFailedColour = "#BBBBBB";

bool RowOk(const ReportRow& row) { return row.outcome.ok && row.outcome.result.has_value(); }

// A label safe for one tab-separated chart.dat field.
std::string DataField(const std::string& text) {
  std::string out;
  for (const char c : text) out += (c == '\t' || c == '\n' || c == '\r') ? ' ' : (c == '"' ? '\'' : c);
  return out.empty() ? "-" : out;
}

// A gnuplot double-quoted string literal.
std::string Quote(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

size_t Chars(const std::string& text) {
  size_t n = 0;
  for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// The widest line of a variant's tick label: its label, or "(baseline)",
// which the script puts on a second line under the baseline's label.
size_t TickChars(const ReportRow& row) {
  return std::max(Chars(row.outcome.label), row.is_baseline ? Chars("(baseline)") : 0);
}

// Strategy summary -> colour index (1-based, in order of first appearance);
// failed variants get kNumColours + 1.
struct Groups {
  std::vector<std::string> names;
  std::vector<int> colour_of_row;
};

Groups GroupRows(const std::vector<ReportRow>& rows) {
  Groups groups;
  std::map<std::string, int> index;
  for (const ReportRow& row : rows) {
    if (!RowOk(row)) {
      groups.colour_of_row.push_back(kNumColours + 1);
      continue;
    }
    const std::string name = StrategySummary(*row.outcome.result);
    auto [it, inserted] = index.emplace(name, static_cast<int>(groups.names.size()));
    if (inserted) groups.names.push_back(name);
    groups.colour_of_row.push_back(it->second % kNumColours + 1);
  }
  return groups;
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

std::string Tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  const size_t begin = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  return absl::StrJoin(all.begin() + begin, all.end(), "\n");
}

bool IsExecutable(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

// The canvas of the chart: its size in pixels, the panels' shares of it and
// the ranges of their y axes.
struct ChartLayout {
  int n = 1;                // bars (at least one slot)
  double ymax = 0;          // the highest bar with its error bar, images/sec; 1 when none has a height
  double effmax = 100;      // the highest efficiency, percent (at least 100)
  bool any_failed = false;  // a failed variant needs its legend entry
  int width = 900;
  int height = 900;
  bool rotate = false;        // tick labels too long for their slot are rotated
  double eff_share = 0.36;    // fraction of the canvas for the efficiency panel (bottom)
  double title_share = 0.09;  // and for the title
};

// Sizes in pixels: a slot of ~170 px per variant; labels longer than their
// slot are rotated, and the canvas grows to hold them.
ChartLayout LayoutFor(const std::vector<ReportRow>& rows) {
  ChartLayout layout;
  layout.n = std::max<int>(1, rows.size());
  size_t longest = 0;
  for (const ReportRow& row : rows) {
    longest = std::max(longest, TickChars(row));
    if (!RowOk(row)) {
      layout.any_failed = true;
      continue;
    }
    const RunResult& r = *row.outcome.result;
    layout.ymax = std::max(layout.ymax, r.images_per_sec() + std::max(0.0, r.images_per_sec_stddev()));
    if (std::isfinite(row.scaling_efficiency)) layout.effmax = std::max(layout.effmax, row.scaling_efficiency * 100);
  }
  if (layout.ymax <= 0) layout.ymax = 1;
  layout.width = std::clamp(170 * layout.n + 220, 900, 2600);
  const double slot_px = static_cast<double>(layout.width - 220) / layout.n;
  layout.rotate = longest * 7.5 > slot_px * 0.92;
  const int label_rows = layout.rotate ? static_cast<int>(std::ceil(longest * 0.32)) : 1;
  layout.height = 900 + (layout.rotate ? 2 * 14 * label_rows : 0);
  layout.eff_share = 0.36 + (layout.rotate ? 0.02 : 0);
  return layout;
}

// How to redraw, the script's variables and the tick label function.
std::string ScriptHeader(const std::vector<ReportRow>& rows, const ChartText& text, const ChartLayout& layout) {
  std::string gp;
  absl::StrAppend(&gp, "# Generated by pstrain-compare. Redraw (e.g. after editing) with:\n",
                  "#   cd <this directory> && gnuplot chart.gp\n",
                  "# It reads chart.dat and writes chart.svg and chart.png.\n\n");
  absl::StrAppend(&gp, "n = ", layout.n, "\n", absl::StrFormat("ymax = %.6g\n", layout.ymax * 1.28),
                  absl::StrFormat("effmax = %.6g\n", layout.effmax * 1.22));
  int baseline = -1;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].is_baseline) baseline = static_cast<int>(i);
  absl::StrAppend(&gp, "title = ", Quote(text.title), "\n", "subtitle = ", Quote(text.subtitle), "\n",
                  "baseline = ", baseline, "\n",
                  "# Tick label of a row: its label, the baseline's with a second line.\n",
                  "tick(i, l) = strcol(l) . (column(i) == baseline ? \"\\n(baseline)\" : \"\")\n\n");
  return gp;
}

// Opens the loop that draws the chart twice, as chart.svg and as chart.png
// (pngcairo where gnuplot has it).
std::string OpenTerminals(const ChartLayout& layout) {
  const int width = layout.width;
  const int height = layout.height;
  return absl::StrCat("do for [format in \"svg png\"] {\n", "  reset\n", "  if (format eq \"svg\") {\n",
                      absl::StrFormat("    set terminal svg size %d,%d dynamic noenhanced font "
                                      "\"DejaVu Sans,13\" background rgb \"white\"\n",
                                      width, height),
                      "    set output \"chart.svg\"\n", "  } else {\n",
                      "    if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n",
                      absl::StrFormat("      set terminal pngcairo size %d,%d noenhanced font "
                                      "\"DejaVu Sans,11\" background rgb \"white\"\n",
                                      width, height),
                      "    } else {\n",
                      absl::StrFormat("      set terminal png size %d,%d noenhanced font "
                                      "\"DejaVuSans,11\" background rgb \"white\"\n",
                                      width, height),
                      "    }\n", "    set output \"chart.png\"\n", "  }\n");
}

// The style both panels share, the colours, and the multiplot with its title.
std::string CommonStyle(const ChartLayout& layout) {
  std::string gp;
  absl::StrAppend(&gp, "  set encoding utf8\n", "  set datafile separator \"\\t\"\n",
                  "  set style fill solid 0.85 border rgb \"#444444\"\n", "  set boxwidth 0.62\n",
                  "  set xrange [-0.6:n-0.4]\n", "  set border 3 lc rgb \"#444444\"\n",
                  "  set xtics nomirror scale 0\n", "  set ytics nomirror\n",
                  "  set grid ytics lc rgb \"#DDDDDD\" dt 1\n", "  set lmargin 13\n  set rmargin 4\n");
  if (layout.rotate) {
    absl::StrAppend(&gp, "  set xtics rotate by 25 right\n");
  } else {
    // Room for two lines of tick labels (the baseline's second line).
    absl::StrAppend(&gp, "  set bmargin 4\n");
  }
  for (int k = 0; k < kNumColours; ++k)
    absl::StrAppend(&gp, "  set linetype ", k + 1, " lc rgb \"", kColours[k], "\"\n");
  absl::StrAppend(&gp, "  set linetype ", kNumColours + 1, " lc rgb \"", kFailedColour, "\"\n");
  absl::StrAppend(&gp, "  set multiplot title title font \",16\"\n");
  return gp;
}

// Top panel: images/sec ± stddev per variant, the speed-up over the baseline
// above each bar, and a legend of the strategies' colours.
std::string ThroughputPanel(const ChartLayout& layout, const Groups& groups) {
  std::string gp;
  absl::StrAppend(&gp, "\n  # Throughput: images/sec ± stddev, speed-up over the baseline above each bar.\n",
                  absl::StrFormat("  set origin 0, %.3f\n  set size 1, %.3f\n", layout.eff_share,
                                  1 - layout.eff_share - layout.title_share + 0.04),
                  "  set title subtitle font \",11\" tc rgb \"#444444\"\n",
                  "  set ylabel \"images/sec (all workers; mean ± stddev)\"\n", "  set yrange [0:ymax]\n",
                  "  set key top left horizontal maxcols 4 reverse Left samplen 1.5 spacing 1.1 box lc rgb "
                  "\"#CCCCCC\" opaque\n",
                  "  plot \"chart.dat\" using 1:3:5:xticlabels(tick(1, 2)) with boxes lc variable notitle, "
                  "\\\n",
                  "       \"\" using 1:($3-$4):(0):(2*$4) with vectors heads size screen 0.006,90 lc rgb "
                  "\"#222222\" lw 1.5 notitle, \\\n",
                  "       \"\" using 1:($3+$4):6 with labels offset 0,1.9 font \",10\" notitle, \\\n",
                  "       \"\" using 1:($3+$4):7 with labels offset 0,0.8 font \",11\" tc rgb \"#000000\" "
                  "notitle");
  for (size_t g = 0; g < groups.names.size(); ++g) {
    absl::StrAppend(&gp, ", \\\n       NaN with boxes lt ", g % kNumColours + 1, " title ", Quote(groups.names[g]));
  }
  if (layout.any_failed) {
    absl::StrAppend(&gp, ", \\\n       NaN with boxes lt ", kNumColours + 1, " title \"failed\"");
  }
  absl::StrAppend(&gp, "\n");
  return gp;
}

// Bottom panel: every variant's scaling efficiency against a dashed 100%
// line; then closes the loop OpenTerminals opened.
std::string EfficiencyPanel(const ChartLayout& layout) {
  return absl::StrCat("\n  # Scaling efficiency: speed-up / (devices / baseline devices); 100% = linear.\n",
                      absl::StrFormat("  set origin 0, 0\n  set size 1, %.3f\n", layout.eff_share),
                      "  set title \"scaling efficiency = speed-up ÷ (devices ÷ baseline devices); dashed line: "
                      "100% = linear scaling\" font \",11\" tc rgb \"#444444\"\n",
                      "  set ylabel \"scaling efficiency\"\n", "  set yrange [0:effmax]\n",
                      "  set style textbox opaque noborder margins 1,1\n", "  set format y \"%g%%\"\n", "  unset key\n",
                      "  set arrow 1 from graph 0, first 100 to graph 1, first 100 nohead dt 2 lw 1.5 lc rgb "
                      "\"#666666\" back\n",
                      "  plot \"chart.dat\" using 1:8:5:xticlabels(tick(1, 2)) with boxes lc variable notitle, "
                      "\\\n",
                      "       \"\" using 1:8:9 with labels boxed offset 0,0.9 font \",10\" notitle\n",
                      "  unset multiplot\n", "  set output\n", "}\n");
}

}  // namespace

std::string ChartData(const std::vector<ReportRow>& rows) {
  const Groups groups = GroupRows(rows);
  std::string data =
      "# index\tlabel\timages_per_sec\tstddev\tcolour\trate_label\tspeedup_label\t"
      "efficiency_percent\tefficiency_label\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const ReportRow& row = rows[i];
    std::vector<std::string> fields = {absl::StrCat(i), DataField(row.outcome.label)};
    if (RowOk(row)) {
      const RunResult& r = *row.outcome.result;
      const double eff = std::isfinite(row.scaling_efficiency) ? row.scaling_efficiency * 100 : 0;
      fields.insert(
          fields.end(),
          {absl::StrFormat("%.6g", r.images_per_sec()), absl::StrFormat("%.6g", r.images_per_sec_stddev()),
           absl::StrCat(groups.colour_of_row[i]), FormatRate(r.images_per_sec()),
           std::isfinite(row.speedup) ? FormatSpeedup(row.speedup) : std::string(), absl::StrFormat("%.4g", eff),
           std::isfinite(row.scaling_efficiency) ? FormatPercent(row.scaling_efficiency) : std::string("-")});
    } else {
      fields.insert(fields.end(),
                    {"0", "0", absl::StrCat(groups.colour_of_row[i]),
                     row.outcome.exit_code < 0 ? std::string("not run")
                                               : absl::StrCat("failed (exit ", row.outcome.exit_code, ")"),
                     "", "0", "failed"});
    }
    data += absl::StrJoin(fields, "\t") + "\n";
  }
  return data;
}

std::string ChartScript(const std::vector<ReportRow>& rows, const ChartText& text) {
  const ChartLayout layout = LayoutFor(rows);
  return absl::StrCat(ScriptHeader(rows, text, layout), OpenTerminals(layout), CommonStyle(layout),
                      ThroughputPanel(layout, GroupRows(rows)), EfficiencyPanel(layout));
}

std::string FindGnuplot(const std::string& gnuplot) {
  if (gnuplot.empty()) return "";
  if (gnuplot.find('/') != std::string::npos) return IsExecutable(gnuplot) ? gnuplot : "";
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    const std::string candidate = absl::StrCat(dir, "/", gnuplot);
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

absl::Status DrawChart(const std::vector<ReportRow>& rows, const ChartText& text, const std::string& out_dir,
                       const std::string& gnuplot_path) {
  const fs::path dir(out_dir);
  if (absl::Status s = WriteText((dir / "chart.dat").string(), ChartData(rows)); !s.ok()) return s;
  if (absl::Status s = WriteText((dir / "chart.gp").string(), ChartScript(rows, text)); !s.ok()) return s;
  if (gnuplot_path.empty()) {
    return absl::NotFoundError(
        "gnuplot not found on PATH, so no chart.svg/chart.png (install it, e.g. `apt-get install "
        "gnuplot-nox`, then run `gnuplot chart.gp` in the output directory)");
  }
  const std::string log_path = (dir / "chart.log").string();
  std::error_code ec;
  for (const char* name : {"chart.svg", "chart.png"}) fs::remove(dir / name, ec);

  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("cannot start gnuplot: fork failed");
  if (pid == 0) {
    const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int null_in = open("/dev/null", O_RDONLY);
    if (log >= 0) {
      dup2(log, STDOUT_FILENO);
      dup2(log, STDERR_FILENO);
    }
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    if (chdir(out_dir.c_str()) != 0) _exit(126);
    execl(gnuplot_path.c_str(), gnuplot_path.c_str(), "chart.gp", static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waiting for gnuplot failed");
  }
  const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  const bool drawn = fs::exists(dir / "chart.svg", ec) && fs::file_size(dir / "chart.svg", ec) > 0 &&
                     fs::exists(dir / "chart.png", ec) && fs::file_size(dir / "chart.png", ec) > 0;
  if (!exited_ok || !drawn) {
    const std::string how = WIFEXITED(status) ? absl::StrCat("exit code ", WEXITSTATUS(status))
                                              : absl::StrCat("signal ", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return absl::InternalError(absl::StrCat(gnuplot_path, " chart.gp failed (", how,
                                            drawn ? "" : ", chart.svg/chart.png missing", "); see ", log_path, ":\n",
                                            Tail(log_path, 8)));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::compare
