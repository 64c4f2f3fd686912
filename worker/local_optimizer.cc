#include "worker/local_optimizer.h"

#include <algorithm>

#include "common/status_macros.h"
#include "optim/loss_scaler.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<LocalOptimizer>> LocalOptimizer::Create(const OptimizerConfig& config,
                                                                       const std::vector<Variable>& variables,
                                                                       int64_t total_steps, bool skip_non_finite) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(config));
  PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule, LearningRateSchedule::Create(config, total_steps));
  std::unique_ptr<LocalOptimizer> local(new LocalOptimizer(std::move(optimizer), std::move(schedule), skip_non_finite));
  for (const Variable& v : variables) {
    local->slots_.emplace_back(local->optimizer_->num_slots(), std::vector<float>(v.value.num_elements(), 0.0f));
  }
  return local;
}

absl::StatusOr<std::vector<std::unique_ptr<LocalOptimizer>>> LocalOptimizer::ForReplicas(const ExperimentConfig& config,
                                                                                         ReplicaSet& replicas,
                                                                                         int64_t total_steps) {
  const bool scales_loss = ScalesLoss(config.loss_scaling());
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers;
  for (int r = 0; r < replicas.size(); ++r) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<LocalOptimizer> optimizer,
                             Create(config.optimizer(), replicas.variables(r), total_steps, scales_loss));
    optimizers.push_back(std::move(optimizer));
  }
  return optimizers;
}

bool LocalOptimizer::Apply(std::vector<Variable>& variables, int64_t step, float gradient_scale,
                           float learning_rate_scale) {
  if (skip_non_finite_) {
    for (const Variable& var : variables) {
      if (!AllFinite(var.grad.data(), var.grad.num_elements())) {
        ++skipped_steps_;
        return false;
      }
    }
  }
  const OptimizerStep update{.learning_rate = schedule_.At(step) * learning_rate_scale,
                             .gradient_scale = gradient_scale};
  std::vector<std::vector<float*>> slots(variables.size());
  std::vector<VariableUpdate> updates;
  for (size_t v = 0; v < variables.size(); ++v) {
    for (auto& slot : slots_[v]) slots[v].push_back(slot.data());
    updates.push_back({.value = variables[v].value.data(),
                       .grad = variables[v].grad.data(),
                       .n = variables[v].value.num_elements(),
                       .slots = slots[v].data()});
  }
  optimizer_->ApplyAll(updates, update);  // in place
  return true;
}

std::vector<std::vector<float>*> LocalOptimizer::mutable_slots() {
  std::vector<std::vector<float>*> all;
  for (auto& variable : slots_) {
    for (auto& slot : variable) all.push_back(&slot);
  }
  return all;
}

}  // namespace pstrain
