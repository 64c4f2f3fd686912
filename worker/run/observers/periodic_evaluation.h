// PeriodicEvaluation: the chief's evaluation on the test set every
// `train.eval_every_steps` steps while it trains (not after the last step:
// the final evaluation follows it anyway). What an evaluation does -- which
// values it reads, the line it prints, who hears of it -- is the training
// run's `evaluate` (worker/run/training_run.h); this observer only says when.
#pragma once

#include <functional>

#include "worker/run/observers/step_observer.h"

namespace pstrain {

class PeriodicEvaluation : public StepObserver {
 public:
  // `evaluate(steps_done)` runs after every `every` synchronised steps.
  PeriodicEvaluation(int64_t every, int64_t total_steps, std::function<void(int64_t steps_done)> evaluate)
      : every_(every), total_steps_(total_steps), evaluate_(std::move(evaluate)) {}

  void OnStepEnd(const StepOutcome& outcome) override {
    const int64_t done = outcome.step + 1;
    if (outcome.ok() && every_ > 0 && done % every_ == 0 && done < total_steps_) evaluate_(done);
  }

 private:
  const int64_t every_;
  const int64_t total_steps_;
  const std::function<void(int64_t)> evaluate_;
};

}  // namespace pstrain
