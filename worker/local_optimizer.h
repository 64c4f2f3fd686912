// LocalOptimizer: applies the experiment's optimizer to one replica's
// variables in place, on the host (strategies without parameter servers).
// The same optimizer code and learning-rate schedule as the PS (optim/), so a
// replicated run and a PS run compute identical updates.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "worker/replica_set.h"

namespace pstrain {

class LocalOptimizer {
 public:
  // `skip_non_finite`: Apply() skips a step whose gradients are not all
  // finite (loss scaling's overflowed steps, optim/loss_scaler.h).
  static absl::StatusOr<std::unique_ptr<LocalOptimizer>> Create(const OptimizerConfig& config,
                                                                const std::vector<Variable>& variables,
                                                                int64_t total_steps, bool skip_non_finite = false);
  // One optimizer per replica of `replicas` (each replica keeps its own
  // slots), from the config's optimizer; skipping non-finite steps when it
  // scales the loss.
  static absl::StatusOr<std::vector<std::unique_ptr<LocalOptimizer>>> ForReplicas(const ExperimentConfig& config,
                                                                                  ReplicaSet& replicas,
                                                                                  int64_t total_steps);
  // w <- update(w, gradient_scale * grad) for every variable, as global step
  // `step` (gradient_scale: e.g. 1/N when the gradients hold sums of N), the
  // schedule's learning rate at `step` times learning_rate_scale.
  // With skip_non_finite, a step with a gradient element that is not finite
  // changes nothing (no variable, no slot) and returns false: replicas and
  // workers that hold the same reduced gradients all skip it alike.
  bool Apply(std::vector<Variable>& variables, int64_t step, float gradient_scale = 1.0f,
             float learning_rate_scale = 1.0f);
  // Steps Apply() skipped.
  int64_t skipped_steps() const { return skipped_steps_; }
  // Every slot's elements, variable by variable, slot by slot: the state a
  // worker joining an elastic group receives beside the variables.
  std::vector<std::vector<float>*> mutable_slots();
  // Takes `other`'s slots (an optimizer of the same variables).
  void CopySlotsFrom(const LocalOptimizer& other) { slots_ = other.slots_; }

 private:
  LocalOptimizer(std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule, bool skip_non_finite)
      : optimizer_(std::move(optimizer)), schedule_(std::move(schedule)), skip_non_finite_(skip_non_finite) {}
  std::unique_ptr<Optimizer> optimizer_;
  LearningRateSchedule schedule_;
  const bool skip_non_finite_;
  int64_t skipped_steps_ = 0;
  std::vector<std::vector<std::vector<float>>> slots_;  // [variable][slot][element]
};

}  // namespace pstrain
