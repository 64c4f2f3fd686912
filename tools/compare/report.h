// The comparison report: speed-up and scaling efficiency of every variant
// over the baseline, results.csv and the markdown table (results.md).
//
// speed-up            = images_per_sec / baseline images_per_sec
// scaling efficiency  = speed-up / (devices_total / baseline devices_total)
// devices_total       = num_workers * devices_per_worker
//
// 100% efficiency means throughput grew exactly with the number of devices.
// Values that cannot be computed (a failed variant, a failed or zero
// baseline) are NaN: empty in the CSV, "—" in the markdown.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/metrics/result_json.h"

namespace pstrain::compare {

// What happened to one variant.
struct VariantOutcome {
  std::string label;
  std::string run_dir;
  bool ok = false;                  // Launched, exited 0 and left a readable result.json.
  int exit_code = 0;                // pstrain-launch's exit code (-1: not started).
  std::string error;                // Why it failed, one line; empty when ok.
  std::optional<RunResult> result;  // Read with ReadResultJson; set iff ok.
};

struct ReportRow {
  VariantOutcome outcome;
  bool is_baseline = false;
  double speedup = 0;             // NaN when unknown.
  double scaling_efficiency = 0;  // NaN when unknown; 1.0 = linear.
};

// num_workers * devices_per_worker.
int DevicesTotal(const RunResult& result);

// Fills speed-up and scaling efficiency of every outcome against
// outcomes[baseline].
std::vector<ReportRow> ComputeReport(const std::vector<VariantOutcome>& outcomes, int baseline);
// The same with each outcome's own speed-up reference: outcomes[i] against
// outcomes[baselines[i]] (is_baseline marks `baseline`, the matrix's).
std::vector<ReportRow> ComputeReport(const std::vector<VariantOutcome>& outcomes, int baseline,
                                     const std::vector<int>& baselines);

// "parameter_server · sync", "parameter_server · ssp (staleness 2)",
// "replicated · nccl", "parameter_server · sync · params on gpu": the
// strategy fields of result.json that tell variants apart.
std::string StrategySummary(const RunResult& result);

// Header plus one row per variant: label, every result.json contract field
// (RunResult order; test_accuracy empty when absent), speedup,
// scaling_efficiency, status ("ok"/"failed"), exit_code, error, run_dir,
// test_auc, planted_auc, warnings (result.json's, joined by "; ").
// RFC 4180 quoting.
std::string FormatCsv(const std::vector<ReportRow>& rows);

// The markdown table: variant | strategy | PS | workers × devices |
// images/sec (± stddev) | speed-up | scaling eff. | final loss | test accuracy.
// A run with warnings (it did not learn) has "!" after its accuracy (AUC).
// Columns are padded so the table also reads well as plain text.
std::string FormatMarkdownTable(const std::vector<ReportRow>& rows);

struct ReportContext {
  std::string matrix_name;
  std::string description;
  std::string matrix_path;
  std::string base_path;
  std::string baseline_label;
  std::string started;  // Local time the comparison started.
  double total_seconds = 0;
  bool chart = false;  // chart.svg/chart.png were drawn.
};

// results.md: a heading, what was compared, the table, each "!" row's
// warnings under it, the definitions of
// speed-up and efficiency, the settings every variant shared, failures and
// links to the chart and the run directories.
std::string FormatMarkdownReport(const std::vector<ReportRow>& rows, const ReportContext& context);

// Settings every successful variant shared, e.g. "model mlp, batch 64 per
// device, 300 steps, device cpu"; empty when nothing is common.
std::string CommonSettings(const std::vector<ReportRow>& rows);

// Number formatting shared with the chart.
std::string FormatRate(double images_per_sec);  // "38512" / "1.23e+06"
std::string FormatSpeedup(double speedup);      // "1.87×", "—"
std::string FormatPercent(double fraction);     // "94%", "—"

}  // namespace pstrain::compare
