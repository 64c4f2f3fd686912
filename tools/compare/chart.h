// The comparison chart, drawn by gnuplot: a bar per variant of images/sec
// with ± stddev error bars and the speed-up over the baseline written above
// it, coloured by strategy, and below it a second panel with every variant's
// scaling efficiency against a dashed 100% line.
//
// The tool writes OUT/chart.dat (the numbers, tab-separated) and OUT/chart.gp
// (the script; it reads chart.dat and writes chart.svg and chart.png in its
// own directory, so `cd OUT && gnuplot chart.gp` redraws it), then runs
// gnuplot as a subprocess.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tools/compare/report.h"

namespace pstrain::compare {

struct ChartText {
  std::string title;     // e.g. "distributed_strategies: training throughput"
  std::string subtitle;  // e.g. "model mlp, batch 64 per device, ... ; baseline: sync, 1 worker"
};

// chart.dat: one line per variant, tab-separated:
//   index  label  images/sec  stddev  colour  rate-label  speedup-label  efficiency-%
//   efficiency-label
// A failed variant has 0 for the numbers, "failed (exit N)"/"failed" as its
// labels and an empty speed-up label (gnuplot skips it).
std::string ChartData(const std::vector<ReportRow>& rows);

// The gnuplot script for `rows` (which must be what ChartData was given).
std::string ChartScript(const std::vector<ReportRow>& rows, const ChartText& text);

// The gnuplot executable: `gnuplot` if it names a path (contains '/') and is
// executable, else the first executable `gnuplot` on $PATH; "" when none.
std::string FindGnuplot(const std::string& gnuplot = "gnuplot");

// Writes chart.dat and chart.gp into `out_dir` and runs `gnuplot_path
// chart.gp` there (its output goes to out_dir/chart.log). NOT_FOUND when
// `gnuplot_path` is empty; INTERNAL when gnuplot fails or leaves no
// chart.svg/chart.png (the message ends with the tail of chart.log).
absl::Status DrawChart(const std::vector<ReportRow>& rows, const ChartText& text, const std::string& out_dir,
                       const std::string& gnuplot_path);

}  // namespace pstrain::compare
