// WorkerMetrics: a worker's progress as Prometheus metrics
// (common/telemetry/), labelled {worker="<i>"}: gauges pstrain_worker_step
// (steps completed), pstrain_worker_loss, pstrain_worker_images_per_second
// (this worker, last step); counters pstrain_worker_pushed_bytes_total,
// pstrain_worker_pulled_bytes_total, pstrain_worker_allreduced_bytes_total,
// pstrain_worker_wait_seconds_total (waiting for others),
// pstrain_worker_recoveries_total (times it continued after a restarted PS
// shard or chief, or a lost member of its elastic group); gauges
// pstrain_worker_group_generation and pstrain_worker_group_members (the
// elastic all-reduce's group now; -1 and 0 without one); with loss scaling, gauge pstrain_worker_loss_scale and
// counter pstrain_worker_overflow_steps_total; the chief also
// pstrain_worker_test_accuracy (its latest evaluation). A step observer
// (worker/run/observers/step_observer.h): the metrics move after every step.
#pragma once

#include <cmath>
#include <memory>

#include "absl/status/statusor.h"
#include "common/telemetry/metric_registry.h"
#include "optim/loss_scaler.h"
#include "proto/ps.pb.h"
#include "worker/run/observers/step_observer.h"
#include "worker/strategy.h"

namespace pstrain {

class WorkerMetrics : public StepObserver {
 public:
  // Traffic and waiting come from `strategy` (Strategy::traffic) after each
  // step; the loss scale from `loss_scaler` (null:
  // no loss scaling, the gauges stay 0). Both must outlive the metrics.
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Register(MetricRegistry* registry, int worker,
                                                                 const Strategy* strategy, int64_t examples_per_step,
                                                                 const LossScaler* loss_scaler);
  void OnStepEnd(const StepOutcome& outcome) override;
  void OnEvaluation(const Evaluation& evaluation) override {
    test_accuracy_->Set(evaluation.accuracy());
    if (!std::isnan(evaluation.result.auc)) test_auc_->Set(evaluation.result.auc);
  }
  void OnRecovery(int64_t resume_step) override { recoveries_->Add(); }

 private:
  WorkerMetrics(const Strategy* strategy, int64_t examples_per_step, const LossScaler* loss_scaler)
      : strategy_(strategy), examples_per_step_(examples_per_step), loss_scaler_(loss_scaler) {}
  const Strategy* const strategy_;
  const int64_t examples_per_step_;
  const LossScaler* const loss_scaler_;
  Gauge* step_ = nullptr;
  Gauge* loss_ = nullptr;
  Gauge* images_per_sec_ = nullptr;
  Counter* pushed_ = nullptr;
  Counter* pulled_ = nullptr;
  Counter* allreduced_ = nullptr;
  Counter* wait_ = nullptr;
  Counter* recoveries_ = nullptr;
  Gauge* group_generation_ = nullptr;
  Gauge* group_members_ = nullptr;
  Gauge* loss_scale_ = nullptr;
  Gauge* test_auc_ = nullptr;
  Counter* overflow_steps_ = nullptr;
  Gauge* test_accuracy_ = nullptr;
};

}  // namespace pstrain
