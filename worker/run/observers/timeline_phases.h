// TimelinePhases: what the training loop contributes to the worker's
// timeline (config `timeline`; worker/timeline.h) -- per traced step the
// phases "before step" and "after step", each replica's "forward" and
// "backward" (split where the strategy's gradient-ready hook first heard of a
// final gradient; "forward+backward" when it has no hook), the step itself
// ("step", or "failed step"), evaluations -- and a flush after every traced
// step, so a killed worker leaves the steps so far. Strategies record their
// communication on the same timeline themselves.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "worker/run/observers/step_observer.h"
#include "worker/timeline.h"

namespace pstrain {

class TimelinePhases : public StepObserver {
 public:
  TimelinePhases(Timeline* timeline, int replicas);

  // Notes when replica r's first gradient of a step is final.
  GradientReadyHook WrapHook(int replica, GradientReadyHook hook) override;
  void OnStepStart(int64_t step) override;
  void OnStepEnd(const StepOutcome& outcome) override;
  void OnEvaluation(const Evaluation& evaluation) override;

 private:
  void RecordCompute(int replica, const StepOutcome::Compute& compute, int64_t first_gradient_nanos);

  Timeline* const timeline_;
  // Per replica: Unix nanoseconds of the step's first final gradient (0:
  // none yet). Written by backward threads, read by the training thread.
  std::unique_ptr<std::atomic<int64_t>[]> first_gradient_;
  const int replicas_;
};

}  // namespace pstrain
