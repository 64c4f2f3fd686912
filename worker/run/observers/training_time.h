// TrainingTime: the share of a worker's training time spent in steps that
// counted (a fault storm's "effective training time ratio"): the seconds of
// its successful steps, less those of steps a recovery sent it back over
// (trained again after a restore), over the time from its first step's start
// to its last step's end. Failed steps, recoveries, waits to rejoin count
// against it; a run without faults is close to 1.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

class TrainingTime : public StepObserver {
 public:
  explicit TrainingTime(int worker) : worker_(worker) {}

  void OnStepEnd(const StepOutcome& outcome) override;
  // Steps from `resume_step` on are trained again: their first time did not count.
  void OnRecovery(int64_t resume_step) override;
  std::vector<std::string> SummaryLines() const override;

  // Seconds in steps that counted over the span of the steps; 0 before any step.
  double ratio() const;

 private:
  const int worker_;
  std::map<int64_t, double> step_seconds_;  // successful steps that still count
  double counted_ = 0;
  std::optional<absl::Time> first_start_;
  absl::Time last_end_;
};

}  // namespace pstrain
