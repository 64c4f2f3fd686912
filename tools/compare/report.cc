#include "tools/compare/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/metrics/input_bound.h"
#include "tools/compare/tuner_summary.h"

namespace pstrain::compare {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr char kDash[] = "—";

std::string Shortest(double value) {
  if (!std::isfinite(value)) return "";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// Display width: UTF-8 code points (every character used here is one cell).
size_t Width(const std::string& text) {
  size_t width = 0;
  for (const unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// "12345" -> "12,345".
std::string Thousands(int64_t value) {
  std::string digits = absl::StrCat(value < 0 ? -value : value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? "-" + out : out;
}

// The largest peak RSS any worker of the run reported; empty when none did
// (runs recorded before workers reported memory).
std::string LargestPeakRss(const RunResult& r) {
  int64_t largest = 0;
  for (const WorkerReport& w : r.workers()) largest = std::max(largest, w.peak_rss_bytes());
  return largest > 0 ? absl::StrCat(largest) : std::string();
}

// The largest share of a worker's run spent waiting for input (the decode
// pipeline), over its workers.
double InputWaitShare(const RunResult& r) {
  double share = 0;
  for (const WorkerReport& w : r.workers()) share = std::max(share, w.input_wait_share());
  return share;
}

// The overflowed steps of loss scaling, summed over the workers; empty
// without loss scaling.
std::string OverflowSteps(const RunResult& r) {
  if (r.loss_scaling().empty() || r.loss_scaling() == "none") return std::string();
  int64_t total = 0;
  for (const WorkerReport& w : r.workers()) total += w.overflow_steps();
  return absl::StrCat(total);
}

std::string MarkdownCell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace

int DevicesTotal(const RunResult& result) { return result.num_workers() * std::max(1, result.devices_per_worker()); }

namespace {

// outcomes[i] when it can be a speed-up reference (ok, a positive rate).
const RunResult* Reference(const std::vector<VariantOutcome>& outcomes, int i) {
  if (i < 0 || i >= static_cast<int>(outcomes.size())) return nullptr;
  const VariantOutcome& o = outcomes[i];
  if (!o.ok || !o.result.has_value() || o.result->images_per_sec() <= 0 || DevicesTotal(*o.result) <= 0) {
    return nullptr;
  }
  return &*o.result;
}

}  // namespace

std::vector<ReportRow> ComputeReport(const std::vector<VariantOutcome>& outcomes, int baseline) {
  return ComputeReport(outcomes, baseline, std::vector<int>(outcomes.size(), baseline));
}

std::vector<ReportRow> ComputeReport(const std::vector<VariantOutcome>& outcomes, int baseline,
                                     const std::vector<int>& baselines) {
  std::vector<ReportRow> rows;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    ReportRow row;
    row.outcome = outcomes[i];
    row.is_baseline = static_cast<int>(i) == baseline;
    row.speedup = kNaN;
    row.scaling_efficiency = kNaN;
    const RunResult* base = Reference(outcomes, baselines[i]);
    if (base != nullptr && row.outcome.ok && row.outcome.result.has_value()) {
      const RunResult& r = *row.outcome.result;
      row.speedup = r.images_per_sec() / base->images_per_sec();
      const double device_ratio = static_cast<double>(DevicesTotal(r)) / static_cast<double>(DevicesTotal(*base));
      if (device_ratio > 0) row.scaling_efficiency = row.speedup / device_ratio;
    }
    // An emulated device's rate is known: efficiency against one such device.
    if (row.outcome.ok && row.outcome.result.has_value() &&
        row.outcome.result->emulation().device_images_per_sec() > 0) {
      row.scaling_efficiency = row.outcome.result->emulation().scaling_efficiency();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string StrategySummary(const RunResult& r) {
  std::vector<std::string> parts = {r.variable_update().empty() ? "?" : r.variable_update()};
  if (r.num_ps() > 0) {  // consistency is the parameter servers' rule
    if (r.staleness() > 0) {
      parts.push_back(absl::StrCat(r.consistency(), " (staleness ", r.staleness(), ")"));
    } else if (!r.consistency().empty()) {
      parts.push_back(r.consistency());
    }
  }
  if (!r.all_reduce_spec().empty()) parts.push_back(r.all_reduce_spec());
  if (!r.local_parameter_device().empty() && r.local_parameter_device() != "cpu")
    parts.push_back(absl::StrCat("params on ", r.local_parameter_device()));
  return absl::StrJoin(parts, " · ");
}

std::string FormatRate(double value) {
  if (!std::isfinite(value)) return kDash;
  if (value >= 1e9) return absl::StrFormat("%.3g", value);
  if (value >= 100) return Thousands(static_cast<int64_t>(std::llround(value)));
  if (value >= 10) return absl::StrFormat("%.1f", value);
  return absl::StrFormat("%.2f", value);
}

std::string FormatSpeedup(double speedup) {
  if (!std::isfinite(speedup)) return kDash;
  return absl::StrFormat("%.2f×", speedup);
}

std::string FormatPercent(double fraction) {
  if (!std::isfinite(fraction)) return kDash;
  return absl::StrFormat("%.0f%%", fraction * 100);
}

namespace {

// The devices column's arithmetic: " bf16" / " fp16" for mixed precision,
// " TF32 conv" / " TF32" for fp32 with TF32 products; strict fp32 (and
// results that do not say) go unmarked.
std::string ArithmeticMark(const RunResult& r) {
  if (!r.precision().empty() && r.precision() != "fp32") return absl::StrCat(" ", r.precision());
  if (r.fp32_math() == "tf32_convolutions") return " TF32 conv";
  if (r.fp32_math() == "tf32") return " TF32";
  return "";
}

// The CSV's columns, in order (FormatCsv).
const std::vector<std::string>& CsvHeader() {
  static const std::vector<std::string> header = {"label",
                                                  "experiment",
                                                  "model",
                                                  "variable_update",
                                                  "local_parameter_device",
                                                  "all_reduce_spec",
                                                  "consistency",
                                                  "staleness",
                                                  "transport",
                                                  "num_ps",
                                                  "num_workers",
                                                  "devices_per_worker",
                                                  "device",
                                                  "batch_size_per_device",
                                                  "global_batch_size",
                                                  "steps",
                                                  "images_per_sec",
                                                  "images_per_sec_stddev",
                                                  "final_loss",
                                                  "test_accuracy",
                                                  "wall_seconds",
                                                  "speedup",
                                                  "scaling_efficiency",
                                                  "worker_peak_rss_bytes",
                                                  "precision",
                                                  "fp32_math",
                                                  "loss_scaling",
                                                  "overflow_steps",
                                                  "status",
                                                  "exit_code",
                                                  "error",
                                                  "run_dir",
                                                  "test_auc",
                                                  "planted_auc",
                                                  "warnings"};
  return header;
}

}  // namespace

std::string FormatCsv(const std::vector<ReportRow>& rows) {
  const std::vector<std::string>& header = CsvHeader();
  std::string csv = absl::StrJoin(header, ",") + "\n";
  for (const ReportRow& row : rows) {
    const VariantOutcome& o = row.outcome;
    std::vector<std::string> fields = {o.label};
    if (o.result.has_value()) {
      const RunResult& r = *o.result;
      for (std::string value : {r.experiment(),
                                r.model(),
                                r.variable_update(),
                                r.local_parameter_device(),
                                r.all_reduce_spec(),
                                r.consistency(),
                                absl::StrCat(r.staleness()),
                                r.transport(),
                                absl::StrCat(r.num_ps()),
                                absl::StrCat(r.num_workers()),
                                absl::StrCat(r.devices_per_worker()),
                                r.device(),
                                absl::StrCat(r.batch_size_per_device()),
                                absl::StrCat(r.global_batch_size()),
                                absl::StrCat(r.steps()),
                                Shortest(r.images_per_sec()),
                                Shortest(r.images_per_sec_stddev()),
                                Shortest(r.final_loss()),
                                r.has_test_accuracy() ? Shortest(r.test_accuracy()) : std::string(),
                                Shortest(r.wall_seconds())}) {
        fields.push_back(std::move(value));
      }
    } else {
      fields.resize(fields.size() + 20);
    }
    fields.push_back(Shortest(row.speedup));
    fields.push_back(Shortest(row.scaling_efficiency));
    fields.push_back(o.result.has_value() ? LargestPeakRss(*o.result) : std::string());
    fields.push_back(o.result.has_value() ? o.result->precision() : std::string());
    fields.push_back(o.result.has_value() ? o.result->fp32_math() : std::string());
    fields.push_back(o.result.has_value() ? o.result->loss_scaling() : std::string());
    fields.push_back(o.result.has_value() ? OverflowSteps(*o.result) : std::string());
    fields.push_back(o.ok ? "ok" : "failed");
    fields.push_back(absl::StrCat(o.exit_code));
    fields.push_back(o.error);
    fields.push_back(o.run_dir);
    fields.push_back(o.result.has_value() && o.result->has_test_auc() ? Shortest(o.result->test_auc()) : "");
    fields.push_back(o.result.has_value() && o.result->has_planted_auc() ? Shortest(o.result->planted_auc()) : "");
    fields.push_back(o.result.has_value() ? absl::StrJoin(o.result->warnings(), "; ") : "");
    std::vector<std::string> quoted;
    for (const std::string& field : fields) quoted.push_back(CsvField(field));
    csv += absl::StrJoin(quoted, ",") + "\n";
  }
  return csv;
}

// A click model's quality: its test AUC, with the best reachable (the
// generator's planted AUC) when known.
std::string AucCell(const RunResult& r) {
  if (!r.has_test_auc() || !std::isfinite(r.test_auc())) return kDash;
  return r.has_planted_auc() ? absl::StrFormat("%.4f (%.4f)", r.test_auc(), r.planted_auc())
                             : absl::StrFormat("%.4f", r.test_auc());
}

std::string FormatMarkdownTable(const std::vector<ReportRow>& rows) {
  // Click models (results with a test AUC) report AUC instead of accuracy.
  const bool auc = std::any_of(rows.begin(), rows.end(), [](const ReportRow& row) {
    return row.outcome.result.has_value() && row.outcome.result->has_test_auc();
  });
  const std::vector<std::string> header = {
      "variant",           "strategy",   "PS",
      "workers × devices", "images/sec", "speed-up",
      "scaling eff.",      "final loss", auc ? "test AUC (planted)" : "test accuracy"};
  // Left-aligned text columns, right-aligned numbers.
  const std::vector<bool> right = {false, false, true, true, true, true, true, true, true};
  std::vector<std::vector<std::string>> cells;
  for (const ReportRow& row : rows) {
    const VariantOutcome& o = row.outcome;
    std::string label = row.is_baseline ? absl::StrCat(o.label, " (baseline)") : o.label;
    if (!o.ok || !o.result.has_value()) {
      cells.push_back({MarkdownCell(label), kDash, kDash, kDash,
                       o.exit_code < 0 ? std::string("not run") : absl::StrCat("failed (exit ", o.exit_code, ")"),
                       kDash, kDash, kDash, kDash});
      continue;
    }
    const RunResult& r = *o.result;
    // A run that did not learn (result.json `warnings`): "!", explained under the table.
    const std::string flag = r.warnings_size() > 0 ? " !" : "";
    cells.push_back({
        MarkdownCell(label),
        MarkdownCell(StrategySummary(r)),
        r.num_ps() > 0 ? absl::StrCat(r.num_ps()) : std::string(kDash),
        absl::StrCat(r.num_workers(), " × ", r.devices_per_worker(), " ", r.device(), ArithmeticMark(r)),
        absl::StrCat(FormatRate(r.images_per_sec()), " ± ", FormatRate(r.images_per_sec_stddev()),
                     r.emulation().cpu_bound() ? " (CPU-bound: not valid)" : "",
                     InputBound(InputWaitShare(r))
                         ? absl::StrFormat(" (input-bound: %.0f%% waiting for input)", 100 * InputWaitShare(r))
                         : ""),
        FormatSpeedup(row.speedup),
        FormatPercent(row.scaling_efficiency),
        std::isfinite(r.final_loss()) ? absl::StrFormat("%.4f", r.final_loss()) : std::string(kDash),
        absl::StrCat(auc ? AucCell(r)
                     : r.has_test_accuracy() && std::isfinite(r.test_accuracy())
                         ? absl::StrFormat("%.2f%%", r.test_accuracy() * 100)
                         : std::string(kDash),
                     flag),
    });
  }
  std::vector<size_t> widths;
  for (const std::string& h : header) widths.push_back(std::max<size_t>(3, Width(h)));
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], Width(line[c]));
  auto pad = [&](const std::string& text, size_t c) {
    const std::string fill(widths[c] - Width(text), ' ');
    return right[c] ? fill + text : text + fill;
  };
  std::string table = "|";
  for (size_t c = 0; c < header.size(); ++c) table += " " + pad(header[c], c) + " |";
  table += "\n|";
  for (size_t c = 0; c < header.size(); ++c) {
    table += right[c] ? absl::StrCat(" ", std::string(widths[c] - 1, '-'), ": |")
                      : absl::StrCat(" ", std::string(widths[c], '-'), " |");
  }
  table += "\n";
  for (const auto& line : cells) {
    table += "|";
    for (size_t c = 0; c < line.size(); ++c) table += " " + pad(line[c], c) + " |";
    table += "\n";
  }
  return table;
}

std::string CommonSettings(const std::vector<ReportRow>& rows) {
  std::set<std::string> models, batches, steps, devices, transports;
  int ok = 0;
  for (const ReportRow& row : rows) {
    if (!row.outcome.ok || !row.outcome.result.has_value()) continue;
    const RunResult& r = *row.outcome.result;
    ++ok;
    models.insert(r.model());
    batches.insert(absl::StrCat(r.batch_size_per_device()));
    steps.insert(absl::StrCat(r.steps()));
    devices.insert(r.device());
    transports.insert(r.transport());
  }
  if (ok == 0) return "";
  std::vector<std::string> parts;
  if (models.size() == 1) parts.push_back(absl::StrCat("model ", *models.begin()));
  if (batches.size() == 1) parts.push_back(absl::StrCat("batch ", *batches.begin(), " per device"));
  if (steps.size() == 1) parts.push_back(absl::StrCat(*steps.begin(), " steps per worker"));
  if (devices.size() == 1) parts.push_back(absl::StrCat("device ", *devices.begin()));
  if (transports.size() == 1) parts.push_back(absl::StrCat("transport ", *transports.begin()));
  return absl::StrJoin(parts, ", ");
}

std::string FormatMarkdownReport(const std::vector<ReportRow>& rows, const ReportContext& context) {
  std::string md = absl::StrCat("# Comparison: ", context.matrix_name, "\n\n");
  if (!context.description.empty()) absl::StrAppend(&md, context.description, "\n\n");
  int failed = 0;
  for (const ReportRow& row : rows) failed += !row.outcome.ok;
  absl::StrAppend(&md, "Matrix `", context.matrix_path, "`, base config `", context.base_path, "`; ", rows.size(),
                  " variants");
  if (failed > 0) absl::StrAppend(&md, " (", failed, " failed)");
  if (!context.started.empty()) absl::StrAppend(&md, ", started ", context.started);
  if (context.total_seconds > 0) absl::StrAppend(&md, absl::StrFormat(", %.0f s in all", context.total_seconds));
  absl::StrAppend(&md, ".\n");
  if (const std::string common = CommonSettings(rows); !common.empty())
    absl::StrAppend(&md, "Every variant: ", common, ".\n");
  absl::StrAppend(&md, "\n", FormatMarkdownTable(rows), "\n");
  for (const ReportRow& row : rows) {
    if (!row.outcome.ok || !row.outcome.result.has_value()) continue;
    for (const std::string& warning : row.outcome.result->warnings()) {
      absl::StrAppend(&md, "**!** ", MarkdownCell(row.outcome.label), ": ", MarkdownCell(warning), "\n\n");
    }
  }
  if (const std::string tuner = TunerSummary(rows); !tuner.empty()) {
    absl::StrAppend(&md, "The layout tuner (seconds in the run's own time; docs/STRATEGIES.md):\n\n", tuner, "\n");
  }
  absl::StrAppend(&md,
                  "- **images/sec**: all workers together, warm-up steps excluded, ± the standard "
                  "deviation reported in `result.json`.\n",
                  "- **speed-up**: images/sec ÷ the baseline's (`", context.baseline_label,
                  "`, or the variant's own `baseline` where the matrix gives one).\n",
                  "- **scaling eff.**: speed-up ÷ (devices ÷ the baseline's devices), where devices = "
                  "workers × devices per worker; 100% means throughput grew exactly with the devices.\n",
                  "- **final loss**: the workers' mean training loss over their last 10 steps "
                  "(docs/RESULTS.md); **test accuracy** is evaluated by the chief on the test set after "
                  "training (— when `train.evaluate` is off); **!**: the run did not learn (its reasons "
                  "are under the table).\n");
  bool emulated = false;
  for (const ReportRow& row : rows) {
    emulated |=
        row.outcome.ok && row.outcome.result.has_value() && row.outcome.result->emulation().device_images_per_sec() > 0;
  }
  if (emulated) {
    absl::StrAppend(&md,
                    "- **Emulated devices** (`device: emulated`, docs/EMULATION.md): images/sec are in emulated "
                    "time, and scaling eff. is images/sec ÷ (devices × one emulated device's rate). A row marked "
                    "CPU-bound is not valid: this machine, not the emulated devices and links, set its pace.\n");
  }
  if (context.chart) {
    absl::StrAppend(&md, "\n![images/sec per variant and scaling efficiency](chart.png)\n\n",
                    "(also `chart.svg`; redraw with `gnuplot chart.gp` in this directory)\n");
  }
  if (failed > 0) {
    absl::StrAppend(&md, "\n## Failed variants\n\n");
    for (const ReportRow& row : rows) {
      if (row.outcome.ok) continue;
      absl::StrAppend(&md, "- **", MarkdownCell(row.outcome.label), "**: exit ", row.outcome.exit_code, " — ",
                      MarkdownCell(row.outcome.error), "; logs in `",
                      std::filesystem::path(row.outcome.run_dir).filename().string(), "/`\n");
    }
  }
  absl::StrAppend(&md, "\n## Run directories\n\n",
                  "Each holds `config.yaml` (the merged config), `launch.log`, the role logs and "
                  "`result.json`.\n\n");
  for (const ReportRow& row : rows) {
    // Relative to results.md, which sits beside the run directories.
    const std::string dir = std::filesystem::path(row.outcome.run_dir).filename().string();
    absl::StrAppend(&md, "- ", MarkdownCell(row.outcome.label), ": [`", dir, "/`](", dir, "/)\n");
  }
  return md;
}

}  // namespace pstrain::compare
