#include "worker/pipeline_tuning.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/config/time_dilation.h"
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
  return std::unique_ptr<PipelineTuning>(
      new PipelineTuning(options, pipeline, timeline, worker_index, TimeDilation(config)));
}

absl::StatusOr<std::optional<int64_t>> PipelineTuning::BeforeStep(int64_t step) {
  const absl::Time start = absl::Now();
  const absl::Time last = last_start_;
  last_start_ = start;
  if (last == absl::InfinitePast()) {
    first_start_ = start;
    return std::nullopt;
  }
  const std::optional<TransferLayout> next = tuner_.Observe(step - 1, absl::ToDoubleSeconds(start - last));
  decision_seconds_.resize(tuner_.decisions().size(), absl::ToDoubleSeconds(start - first_start_) / time_scale_);
  if (!next) return std::nullopt;
  PSTRAIN_ASSIGN_OR_RETURN(const int64_t version, pipeline_->WaitForPulls());
  pipeline_->Relayout(*next, version);
  const TuningDecision& d = tuner_.decisions().back();
  LOG(INFO) << "worker " << worker_ << " layout tuning at step " << step << ": " << d.why << " (the last setting took "
            << d.previous_seconds << " s a step)";
  if (timeline_ != nullptr) {
    timeline_->Record(
        "relayout", "tuning", start, absl::Now(),
        absl::StrCat(R"("batch_bytes": )", next->batch_bytes, R"(, "window_bytes": )", next->window_bytes,
                     R"(, "pushes_per_shard": )", next->pushes_per_shard, R"(, "previous_step_seconds": )",
                     d.previous_seconds, R"(, "why": ")", absl::StrReplaceAll(d.why, {{"\"", "'"}}), "\""));
  }
  last_start_ = absl::Now();  // the wait is the change's, not the next step's
  return version;
}

LayoutTuning PipelineTuning::Record() const {
  LayoutTuning record;
  for (const TuningDecision& d : tuner_.decisions()) {
    LayoutTuning::Decision* out = record.add_decisions();
    out->set_step(d.step);
    out->set_batch_bytes(d.layout.batch_bytes);
    out->set_window_bytes(d.layout.window_bytes);
    out->set_pushes_per_shard(d.layout.pushes_per_shard);
    out->set_previous_step_seconds(d.previous_seconds);
    out->set_why(d.why);
  }
  for (size_t i = 0; i < decision_seconds_.size() && i < tuner_.decisions().size(); ++i) {
    record.mutable_decisions(static_cast<int>(i))->set_run_seconds(decision_seconds_[i]);
  }
  record.set_batch_bytes(tuner_.current().batch_bytes);
  record.set_window_bytes(tuner_.current().window_bytes);
  record.set_pushes_per_shard(tuner_.current().pushes_per_shard);
  record.set_settled(tuner_.settled());
  record.set_settled_step(tuner_.settled() ? tuner_.settled_step() : -1);
  record.set_settled_step_seconds(tuner_.settled() ? tuner_.settled_seconds() : 0);
  return record;
}

}  // namespace pstrain
