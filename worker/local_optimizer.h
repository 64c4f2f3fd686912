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
  static absl::StatusOr<std::unique_ptr<LocalOptimizer>> Create(const OptimizerConfig& config,
                                                                const std::vector<Variable>& variables,
                                                                int64_t total_steps);
  // One optimizer per replica of `replicas` (each replica keeps its own slots).
  static absl::StatusOr<std::vector<std::unique_ptr<LocalOptimizer>>> ForReplicas(const OptimizerConfig& config,
                                                                                  ReplicaSet& replicas,
                                                                                  int64_t total_steps);
  // w <- update(w, gradient_scale * grad) for every variable, as global step
  // `step` (gradient_scale: e.g. 1/N when the gradients hold sums of N).
  void Apply(std::vector<Variable>& variables, int64_t step, float gradient_scale = 1.0f);

 private:
  LocalOptimizer(std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule)
      : optimizer_(std::move(optimizer)), schedule_(std::move(schedule)) {}
  std::unique_ptr<Optimizer> optimizer_;
  LearningRateSchedule schedule_;
  std::vector<std::vector<std::vector<float>>> slots_;  // [variable][slot][element]
};

}  // namespace pstrain
