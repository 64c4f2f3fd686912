#include "worker/run/observers/worker_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<WorkerMetrics>> WorkerMetrics::Register(MetricRegistry* registry, int worker,
                                                                       const Strategy* strategy,
                                                                       int64_t examples_per_step,
                                                                       const LossScaler* loss_scaler) {
  auto m = std::unique_ptr<WorkerMetrics>(new WorkerMetrics(strategy, examples_per_step, loss_scaler));
  const MetricLabels labels = {{"worker", absl::StrCat(worker)}};
  PSTRAIN_ASSIGN_OR_RETURN(m->step_, registry->RegisterGauge("pstrain_worker_step", "Steps completed.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->loss_, registry->RegisterGauge("pstrain_worker_loss", "Loss of the last step.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->images_per_sec_,
                           registry->RegisterGauge("pstrain_worker_images_per_second",
                                                   "This worker's images/sec over the last step.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m->pushed_, registry->RegisterCounter("pstrain_worker_pushed_bytes_total", "Bytes pushed to PS shards.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->pulled_, registry->RegisterCounter("pstrain_worker_pulled_bytes_total",
                                                                 "Bytes pulled from PS shards.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->allreduced_,
                           registry->RegisterCounter("pstrain_worker_allreduced_bytes_total",
                                                     "Bytes this worker contributed to all-reduces.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->wait_, registry->RegisterCounter("pstrain_worker_wait_seconds_total",
                                                               "Seconds spent waiting for others.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m->recoveries_,
      registry->RegisterCounter("pstrain_worker_recoveries_total",
                                "Times training continued after a restarted PS shard or chief, or a lost "
                                "member of its elastic group.",
                                labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m->group_generation_,
      registry->RegisterGauge("pstrain_worker_group_generation",
                              "Generation of this worker's elastic all-reduce group (-1: none).", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m->group_members_,
      registry->RegisterGauge("pstrain_worker_group_members",
                              "Members of this worker's elastic all-reduce group now (0: none).", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->loss_scale_,
                           registry->RegisterGauge("pstrain_worker_loss_scale",
                                                   "Loss scale of the next step (0: no loss scaling).", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->overflow_steps_,
                           registry->RegisterCounter("pstrain_worker_overflow_steps_total",
                                                     "Steps whose gradients overflowed under loss scaling.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m->test_accuracy_,
                           registry->RegisterGauge("pstrain_worker_test_accuracy",
                                                   "Test accuracy of the chief's latest evaluation.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m->test_auc_,
      registry->RegisterGauge("pstrain_worker_test_auc",
                              "Test ROC AUC of the chief's latest evaluation (two-class models).", labels));
  return m;
}

void WorkerMetrics::OnStepEnd(const StepOutcome& outcome) {
  if (!outcome.ok()) return;
  const double seconds = outcome.seconds();
  step_->Set(static_cast<double>(outcome.step + 1));
  loss_->Set(outcome.loss);
  images_per_sec_->Set(seconds > 0 ? examples_per_step_ / seconds : 0);
  const StrategyTraffic traffic = strategy_->traffic();
  pushed_->AdvanceTo(static_cast<double>(traffic.bytes_pushed));
  pulled_->AdvanceTo(static_cast<double>(traffic.bytes_pulled));
  allreduced_->AdvanceTo(static_cast<double>(traffic.bytes_allreduced));
  wait_->AdvanceTo(absl::ToDoubleSeconds(traffic.wait));
  group_generation_->Set(static_cast<double>(traffic.group_generation));
  group_members_->Set(traffic.group_members);
  if (loss_scaler_ != nullptr) {
    loss_scale_->Set(loss_scaler_->scale());
    overflow_steps_->AdvanceTo(static_cast<double>(loss_scaler_->skipped_steps()));
  }
}

}  // namespace pstrain
