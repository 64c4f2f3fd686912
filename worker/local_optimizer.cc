#include "worker/local_optimizer.h"

#include <algorithm>

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(const OptimizerConfig& config,
                                                                       const std::vector<Variable>& variables,
                                                                       int64_t total_steps) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(config));
  PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule, LearningRateSchedule::Create(config, total_steps));
  std::unique_ptr<LocalOptimizer> local(new LocalOptimizer(std::move(optimizer), std::move(schedule)));
  for (const Variable& v : variables) {
    local->slots_.emplace_back(local->optimizer_->num_slots(), std::vector<float>(v.value.num_elements(), 0.0f));
  }
  return local;
}

absl::StatusOr<std::vector<std::unique_ptr<LocalOptimizer>>> LocalOptimizer::ForReplicas(const OptimizerConfig& config,
                                                                                         ReplicaSet& replicas,
                                                                                         int64_t total_steps) {
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers;
  for (int r = 0; r < replicas.size(); ++r) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LocalOptimizer> optimizer,
                             Create(config, replicas.variables(r), total_steps));
    optimizers.push_back(std::move(optimizer));
  }
  return optimizers;
}

void LocalOptimizer::Apply(std::vector<Variable>& variables, int64_t step, float gradient_scale) {
  const OptimizerStep update{.learning_rate = schedule_.At(step), .gradient_scale = gradient_scale};
  for (size_t v = 0; v < variables.size(); ++v) {
    Variable& var = variables[v];
    const int64_t n = var.value.num_elements();
    std::vector<float*> slots;
    for (auto& slot : slots_[v]) slots.push_back(slot.data());
    optimizer_->Apply(var.value.data(), var.grad.data(), n, update, slots.data(), var.value.data());  // in place
  }
}

}  // namespace pstrain
