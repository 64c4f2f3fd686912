#include "tools/compare/tuner_summary.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/metrics/layout_text.h"

namespace pstrain::compare {
namespace {

const RunResult* ResultOf(const ReportRow& row) {
  return row.outcome.ok && row.outcome.result.has_value() ? &*row.outcome.result : nullptr;
}

const LayoutTuning* TuningOf(const RunResult& r) {
  if (r.workers_size() == 0 || !r.workers(0).has_layout_tuning()) return nullptr;
  return r.workers(0).layout_tuning().decisions_size() > 0 ? &r.workers(0).layout_tuning() : nullptr;
}

// The fastest valid run without a tuner: its label and images/sec.
std::optional<std::pair<std::string, double>> FastestFixed(const std::vector<ReportRow>& rows) {
  std::optional<std::pair<std::string, double>> best;
  for (const ReportRow& row : rows) {
    const RunResult* r = ResultOf(row);
    if (r == nullptr || TuningOf(*r) != nullptr || r->emulation().cpu_bound() || r->num_ps() == 0) continue;
    if (!best || r->images_per_sec() > best->second) best = {{row.outcome.label, r->images_per_sec()}};
  }
  return best;
}

// Each re-tune (a settled step time that drifted, or a search that found
// the link changed under it) and how long, in the run's time, it took to
// settle again.
std::string Retunes(const LayoutTuning& t) {
  std::string text;
  const LayoutTuning::Decision* began = nullptr;  // the re-tune not yet settled
  for (const LayoutTuning::Decision& d : t.decisions()) {
    if (absl::StartsWith(d.why(), "re-tune") || absl::StartsWith(d.why(), "re-base")) {
      began = &d;
    } else if (began != nullptr && absl::StartsWith(d.why(), "settled")) {
      absl::StrAppend(&text, absl::StrFormat("; re-tuned at step %d (%.1f s), settled again at step %d, %.1f s later",
                                             began->step(), began->run_seconds(), d.step(),
                                             d.run_seconds() - began->run_seconds()));
      began = nullptr;
    }
  }
  if (began != nullptr) {
    absl::StrAppend(
        &text, absl::StrFormat("; re-tuning since step %d (%.1f s), not settled", began->step(), began->run_seconds()));
  }
  return text;
}

}  // namespace

std::string TunerSummary(const std::vector<ReportRow>& rows) {
  const std::optional<std::pair<std::string, double>> fixed = FastestFixed(rows);
  std::string md;
  for (const ReportRow& row : rows) {
    const RunResult* r = ResultOf(row);
    const LayoutTuning* t = r == nullptr ? nullptr : TuningOf(*r);
    if (t == nullptr) continue;
    absl::StrAppend(&md, "- **", row.outcome.label, "**: ", t->decisions_size(), " decisions; ");
    const LayoutTuning::Decision* settle = nullptr;
    for (const LayoutTuning::Decision& d : t->decisions()) {
      if (absl::StartsWith(d.why(), "settled")) {
        settle = &d;
        break;
      }
    }
    if (settle == nullptr) {
      absl::StrAppend(&md, "never settled");
    } else {
      const double scale = r->emulation().time_scale() > 0 ? r->emulation().time_scale() : 1;
      const double rate = t->settled_step_seconds() > 0
                              ? static_cast<double>(r->global_batch_size()) * scale / t->settled_step_seconds()
                              : 0;
      absl::StrAppend(
          &md, absl::StrFormat("first settled at step %d (%.1f s) on %s", settle->step(), settle->run_seconds(),
                               LayoutText(settle->batch_bytes(), settle->window_bytes(), settle->pushes_per_shard())));
      if (t->settled() && rate > 0) {
        absl::StrAppend(&md, absl::StrFormat("; at the end %.4g s a step (%s images/sec)", t->settled_step_seconds(),
                                             FormatRate(rate)));
        if (fixed) {
          absl::StrAppend(&md, absl::StrFormat(", %.1f%% of the fastest run without a tuner (%s, %s)",
                                               100 * rate / fixed->second, fixed->first, FormatRate(fixed->second)));
        }
      }
    }
    absl::StrAppend(&md, Retunes(*t));
    // Its own figures count only when this machine kept up with the run.
    if (r->emulation().cpu_bound()) {
      absl::StrAppend(&md, " CPU-bound: not valid (", r->emulation().cpu_bound_reason(), ")");
    }
    absl::StrAppend(&md, ".\n");
  }
  return md;
}

}  // namespace pstrain::compare
