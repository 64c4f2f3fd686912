#include "worker/run/observers/timeline_phases.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain {

TimelinePhases::TimelinePhases(Timeline* timeline, int replicas)
    : timeline_(timeline), first_gradient_(new std::atomic<int64_t>[replicas]), replicas_(replicas) {
  for (int r = 0; r < replicas; ++r) first_gradient_[r] = 0;
}

GradientReadyHook TimelinePhases::WrapHook(int replica, GradientReadyHook hook) {
  if (hook == nullptr) return nullptr;
  return [inner = std::move(hook), first = &first_gradient_[replica]](int variable) {
    int64_t none = 0;
    first->compare_exchange_strong(none, absl::ToUnixNanos(absl::Now()));
    inner(variable);
  };
}

void TimelinePhases::OnStepStart(int64_t step) { timeline_->SetStep(step); }

void TimelinePhases::OnStepEnd(const StepOutcome& outcome) {
  // Every step starts with no gradient seen, traced or not.
  std::vector<int64_t> first(replicas_);
  for (int r = 0; r < replicas_; ++r) first[r] = first_gradient_[r].exchange(0);
  if (!timeline_->Tracing()) return;
  timeline_->Record("before step", "phases", outcome.start, outcome.before_done);
  for (size_t r = 0; r < outcome.compute.size(); ++r) RecordCompute(r, outcome.compute[r], first[r]);
  if (!outcome.compute.empty()) timeline_->Record("after step", "phases", outcome.after_start, outcome.end);
  timeline_->Record(outcome.ok() ? "step" : "failed step", "steps", outcome.start, outcome.end);
  if (absl::Status s = timeline_->Flush(); !s.ok()) LOG(WARNING) << s.message();
}

void TimelinePhases::RecordCompute(int replica, const StepOutcome::Compute& compute, int64_t first_gradient_nanos) {
  const std::string lane = absl::StrCat("replica ", replica);
  if (first_gradient_nanos == 0) {
    timeline_->Record("forward+backward", lane, compute.start, compute.end);
    return;
  }
  const absl::Time first = absl::FromUnixNanos(first_gradient_nanos);
  timeline_->Record("forward", lane, compute.start, first);
  timeline_->Record("backward", lane, first, compute.end);
}

void TimelinePhases::OnEvaluation(const Evaluation& evaluation) {
  if (timeline_->Tracing()) timeline_->Record("evaluation", "phases", evaluation.start, evaluation.end);
}

}  // namespace pstrain
