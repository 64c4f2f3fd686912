// TrainingTime: the share of a worker's training time spent in steps that
// counted (a fault storm's "effective training time ratio").
//
// Each successful step counts its cycle: the time since the previous step
// ended (its input, the ledger's exchange, checkpoints between steps
// included), or its own time after a failed step or a recovery, at most 3x
// the median of the last 101 cycles (a step that stalled on a stopped peer
// counts as a typical one). Steps a recovery sent the worker back over
// (trained again after a restore) stop counting. The ratio is what counted
// over the time from the first step's start to the last step's end: failed
// steps, recoveries, stalls and work trained twice count against it; a run
// without faults is close to 1.
#pragma once

#include <cstdint>
#include <deque>
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

  // Seconds that counted over the span of the steps; 0 before any step.
  double ratio() const;

  static constexpr int kCycles = 101;    // the median's window
  static constexpr double kStalled = 3;  // a cycle counts at most this many typical ones

 private:
  // The median of the recent cycles; nullopt before 10 of them.
  std::optional<double> TypicalCycle() const;

  const int worker_;
  std::map<int64_t, double> counted_by_step_;  // successful steps that still count
  double counted_ = 0;
  std::deque<double> cycles_;  // the last kCycles, in seconds
  bool broken_ = true;         // no successful step since the start, a failure or a recovery
  std::optional<absl::Time> first_start_;
  absl::Time last_end_;
};

}  // namespace pstrain
