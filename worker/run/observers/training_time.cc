#include "worker/run/observers/training_time.h"

#include "absl/strings/str_format.h"

namespace pstrain {

void TrainingTime::OnStepEnd(const StepOutcome& outcome) {
  if (!first_start_) first_start_ = outcome.start;
  last_end_ = outcome.end;
  if (!outcome.ok()) return;
  const double seconds = outcome.seconds();
  counted_ += seconds - step_seconds_[outcome.step];
  step_seconds_[outcome.step] = seconds;
}

void TrainingTime::OnRecovery(int64_t resume_step) {
  for (auto it = step_seconds_.lower_bound(resume_step); it != step_seconds_.end();) {
    counted_ -= it->second;
    it = step_seconds_.erase(it);
  }
}

double TrainingTime::ratio() const {
  if (!first_start_) return 0;
  const double span = absl::ToDoubleSeconds(last_end_ - *first_start_);
  return span > 0 ? counted_ / span : 0;
}

std::vector<std::string> TrainingTime::SummaryLines() const {
  if (!first_start_) return {};
  return {
      absl::StrFormat("worker %d training time ratio: %.3f (time in steps that counted / time from its first "
                      "step to its last)",
                      worker_, ratio())};
}

}  // namespace pstrain
