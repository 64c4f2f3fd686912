#include "worker/pipeline_tuning.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config/time_dilation.h"
#include "common/metrics/cpu_usage.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {

bool TuningOn(const ExperimentConfig& config) {
  if (!PipelineOn(config)) return false;
  const PsSchedulingConfig& s = config.ps_scheduling();
  if (s.has_tune()) return s.tune();
  return !s.has_batch_bytes() && !s.has_window_bytes() && !s.has_pushes_per_shard();
}

std::unique_ptr<PipelineTuning> PipelineTuning::Create(const ExperimentConfig& config, PsPipeline* pipeline,
                                                       Timeline* timeline, int worker_index) {
  if (!TuningOn(config)) return nullptr;
  LayoutTuner::Options options;
  const PsSchedulingConfig& s = config.ps_scheduling();
  options.start = {s.batch_bytes(), s.window_bytes(), s.pushes_per_shard()};
  // Followers hear the chief's layout with their heartbeats: the chief's
  // own goes out within one period, theirs bring it back within another.
  if (config.cluster().worker_hosts_size() > 1) options.settle_seconds = 2 * config.timeouts().heartbeat_seconds();
  // Trials of noisy steps last at most this long in the run's own time, so
  // that a re-tune after a link change settles within a minute; the tuner
  // sees wall-clock steps, stretched by an emulation's time scale.
  constexpr double kMaxTrialSeconds = 4;
  const double time_scale = TimeDilation(config);
  options.max_trial_seconds = kMaxTrialSeconds * time_scale;
  return std::unique_ptr<PipelineTuning>(
      new PipelineTuning(options, /*leads=*/worker_index == 0, pipeline, timeline, worker_index, time_scale));
}

PipelineTuning::PipelineTuning(const LayoutTuner::Options& options, bool leads, PsPipeline* pipeline,
                               Timeline* timeline, int worker_index, double time_scale)
    : tuner_(leads ? std::make_unique<LayoutTuner>(options) : nullptr),
      pipeline_(pipeline),
      timeline_(timeline),
      worker_(worker_index),
      time_scale_(time_scale),
      current_(options.start) {}

absl::StatusOr<std::optional<int64_t>> PipelineTuning::BeforeStep(int64_t step) {
  const absl::Time start = absl::Now();
  const absl::Time last = last_start_;
  // Only the chief's tuner weighs CPU; a follower reads no clock of it.
  const double cpu_now = tuner_ != nullptr ? ProcessCpuSeconds() : 0;
  const double cpu_seconds = cpu_now - last_cpu_;
  last_start_ = start;
  last_cpu_ = cpu_now;
  if (last == absl::InfinitePast()) {
    first_start_ = start;
    return std::nullopt;
  }
  const double seconds = absl::ToDoubleSeconds(start - last);
  const std::optional<TuningDecision> decision =
      tuner_ != nullptr ? Decide(step, seconds, cpu_seconds) : Follow(step, seconds);
  if (!decision) return std::nullopt;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, Apply(step, *decision, start));
  return version;
}

std::optional<TuningDecision> PipelineTuning::Decide(int64_t step, double seconds, double cpu_seconds) {
  const std::optional<TransferLayout> next = tuner_->Observe(step - 1, seconds, cpu_seconds);
  decision_seconds_.resize(tuner_->decisions().size(), absl::ToDoubleSeconds(last_start_ - first_start_) / time_scale_);
  if (!next) return std::nullopt;
  absl::MutexLock lock(&mu_);
  published_.set_version(static_cast<int64_t>(tuner_->decisions().size()));
  published_.set_batch_bytes(next->batch_bytes);
  published_.set_window_bytes(next->window_bytes);
  published_.set_pushes_per_shard(next->pushes_per_shard);
  return tuner_->decisions().back();
}

std::optional<TuningDecision> PipelineTuning::Follow(int64_t step, double seconds) {
  ChiefLayout heard;
  {
    absl::MutexLock lock(&mu_);
    if (heard_.version() <= applied_version_) return std::nullopt;
    heard = heard_;
  }
  applied_version_ = heard.version();
  current_ = {heard.batch_bytes(), heard.window_bytes(), heard.pushes_per_shard()};
  followed_.push_back({.step = step,
                       .layout = current_,
                       .previous_seconds = seconds,
                       .why = absl::StrCat("the chief's layout (its change ", heard.version(), ")")});
  decision_seconds_.push_back(absl::ToDoubleSeconds(last_start_ - first_start_) / time_scale_);
  return followed_.back();
}

absl::StatusOr<int64_t> PipelineTuning::Apply(int64_t step, const TuningDecision& decision, absl::Time start) {
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, pipeline_->WaitForPulls());
  const TransferLayout& next = decision.layout;
  pipeline_->Relayout(next, version);
  LOG(INFO) << "worker " << worker_ << " layout tuning at step " << step << ": " << decision.why
            << " (the last setting took " << decision.previous_seconds << " s a step)";
  if (timeline_ != nullptr) {
    timeline_->Record("relayout", "tuning", start, absl::Now(),
                      absl::StrCat(R"("batch_bytes": )", next.batch_bytes, R"(, "window_bytes": )", next.window_bytes,
                                   R"(, "pushes_per_shard": )", next.pushes_per_shard, R"(, "previous_step_seconds": )",
                                   decision.previous_seconds, R"(, "why": ")",
                                   absl::StrReplaceAll(decision.why, {{"\"", "'"}}), "\""));
  }
  // The wait is the change's, not the next step's.
  last_start_ = absl::Now();
  if (tuner_ != nullptr) last_cpu_ = ProcessCpuSeconds();
  return version;
}

std::optional<ChiefLayout> PipelineTuning::Published() const {
  absl::MutexLock lock(&mu_);
  if (published_.version() == 0) return std::nullopt;
  return published_;
}

void PipelineTuning::Heard(const ChiefLayout& layout) {
  if (tuner_ != nullptr) return;  // the chief tunes itself
  absl::MutexLock lock(&mu_);
  if (layout.version() > heard_.version()) heard_ = layout;
}

LayoutTuning PipelineTuning::Record() const {
  const std::vector<TuningDecision>& decisions = tuner_ != nullptr ? tuner_->decisions() : followed_;
  LayoutTuning record;
  for (size_t i = 0; i < decisions.size(); ++i) {
    const TuningDecision& d = decisions[i];
    LayoutTuning::Decision* out = record.add_decisions();
    out->set_step(d.step);
    out->set_batch_bytes(d.layout.batch_bytes);
    out->set_window_bytes(d.layout.window_bytes);
    out->set_pushes_per_shard(d.layout.pushes_per_shard);
    out->set_previous_step_seconds(d.previous_seconds);
    out->set_why(d.why);
    if (i < decision_seconds_.size()) out->set_run_seconds(decision_seconds_[i]);
  }
  const TransferLayout& current = tuner_ != nullptr ? tuner_->current() : current_;
  const bool settled = tuner_ != nullptr && tuner_->settled();
  record.set_batch_bytes(current.batch_bytes);
  record.set_window_bytes(current.window_bytes);
  record.set_pushes_per_shard(current.pushes_per_shard);
  record.set_settled(settled);
  record.set_settled_step(settled ? tuner_->settled_step() : -1);
  record.set_settled_step_seconds(settled ? tuner_->settled_seconds() : 0);
  return record;
}

}  // namespace pstrain
