#include "worker/run/observers/loss_scaling.h"

#include "absl/strings/str_format.h"

namespace pstrain {

LossScaling::LossScaling(LossScaler scaler, std::string mode, ReplicaSet* replicas, int worker_index)
    : scaler_(std::move(scaler)), mode_(std::move(mode)), replicas_(replicas), worker_index_(worker_index) {
  replicas_->SetLossScale(scaler_.scale());
}

void LossScaling::OnStepEnd(const StepOutcome& outcome) {
  if (!outcome.ok()) return;
  ++steps_;
  bool overflowed = false;
  for (int r = 0; r < replicas_->size(); ++r) overflowed |= !replicas_->gradients_finite(r);
  const float before = scaler_.scale();
  scaler_.Update(overflowed);
  if (scaler_.scale() != before) replicas_->SetLossScale(scaler_.scale());
}

void LossScaling::AddToReport(WorkerReport* report) const {
  report->set_overflow_steps(scaler_.skipped_steps());
  report->set_loss_scale(scaler_.scale());
}

std::vector<std::string> LossScaling::SummaryLines() const {
  return {absl::StrFormat("worker %d loss scaling (%s): %d of %d steps overflowed, final scale %.9g", worker_index_,
                          mode_, scaler_.skipped_steps(), steps_, scaler_.scale())};
}

}  // namespace pstrain
