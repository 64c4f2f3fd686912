// StepObserver: one concern that watches a worker's training steps --
// progress lines, the timeline, metrics, TensorBoard summaries, loss scaling,
// CPU sampling, periodic evaluation -- each in its own file under
// worker/run/observers/. The training run (worker/run/training_run.h) calls
// every observer in the order they were added, from the training thread only:
//
//   WrapHook(r, hook)          once per replica, before the first step
//   for each step:
//     OnStepStart(step)        before the strategy's BeforeStep
//     [BeforeStep, forward/backward on every replica, AfterStep]
//     OnStepEnd(outcome)       every step, a failed one too (!outcome.ok())
//     OnRecovery(resume)       after a failed step, once the strategy recovered
//   OnEvaluation(evaluation)   whenever the chief evaluated on the test set
//   AddToReport(report)        once, after the last step: its figures
//   SummaryLines()             once, after AddToReport: lines for the worker's
//                              end-of-run summary
//
// So the next concern that watches steps is a new observer, not more lines in
// the loop. Observers never fail the run: what they cannot do they log.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "models/model.h"
#include "proto/ps.pb.h"

namespace pstrain {

// What one step did, as the training loop saw it.
struct StepOutcome {
  int64_t step = 0;
  // OK when BeforeStep, every replica's forward/backward and AfterStep
  // succeeded; otherwise the strategy's failure, which it then recovers from.
  absl::Status status;
  // Mean over the replicas (steps that got that far).
  float loss = 0;
  absl::Time start;        // before BeforeStep
  absl::Time before_done;  // BeforeStep returned
  absl::Time after_start;  // AfterStep called (after every replica's backward)
  absl::Time end;          // AfterStep returned
  struct Compute {
    absl::Time start, end;  // one replica's batch fill and forward/backward
  };
  std::vector<Compute> compute;  // per replica; empty when BeforeStep failed

  bool ok() const { return status.ok(); }
  double seconds() const { return absl::ToDoubleSeconds(end - start); }
};

// One evaluation on the test set.
struct Evaluation {
  int64_t step = 0;  // the steps trained before it
  EvalResult result;
  absl::Time start, end;
  double accuracy() const { return result.examples > 0 ? static_cast<double>(result.correct) / result.examples : 0; }
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Replica r's gradient-ready hook (null: the strategy has none) as this
  // observer wants it called; by default unchanged.
  virtual GradientReadyHook WrapHook(int replica, GradientReadyHook hook) { return hook; }
  virtual void OnStepStart(int64_t step) {}
  virtual void OnStepEnd(const StepOutcome& outcome) {}
  virtual void OnRecovery(int64_t resume_step) {}
  virtual void OnEvaluation(const Evaluation& evaluation) {}
  virtual void AddToReport(WorkerReport* report) const {}
  virtual std::vector<std::string> SummaryLines() const { return {}; }
};

}  // namespace pstrain
