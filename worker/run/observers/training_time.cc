#include "worker/run/observers/training_time.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace pstrain {

std::optional<double> TrainingTime::TypicalCycle() const {
  if (cycles_.size() < 10) return std::nullopt;
  std::vector<double> sorted(cycles_.begin(), cycles_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

void TrainingTime::OnStepEnd(const StepOutcome& outcome) {
  if (!first_start_) first_start_ = outcome.start;
  const absl::Time previous_end = last_end_;
  last_end_ = outcome.end;
  if (!outcome.ok()) {
    broken_ = true;
    return;
  }
  double cycle = broken_ ? outcome.seconds() : absl::ToDoubleSeconds(outcome.end - previous_end);
  broken_ = false;
  if (std::optional<double> typical = TypicalCycle()) cycle = std::min(cycle, kStalled * *typical);
  cycles_.push_back(cycle);
  if (cycles_.size() > kCycles) cycles_.pop_front();
  double& counted = counted_by_step_[outcome.step];
  counted_ += cycle - counted;
  counted = cycle;
}

void TrainingTime::OnRecovery(int64_t resume_step) {
  broken_ = true;
  for (auto it = counted_by_step_.lower_bound(resume_step); it != counted_by_step_.end();) {
    counted_ -= it->second;
    it = counted_by_step_.erase(it);
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
