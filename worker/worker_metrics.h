// WorkerMetrics: a worker's progress as Prometheus metrics
// (common/telemetry/), labelled {worker="<i>"}: gauges pstrain_worker_step
// (steps completed), pstrain_worker_loss, pstrain_worker_images_per_second
// (this worker, last step); counters pstrain_worker_pushed_bytes_total,
// pstrain_worker_pulled_bytes_total, pstrain_worker_allreduced_bytes_total,
// pstrain_worker_wait_seconds_total (waiting for others),
// pstrain_worker_recoveries_total (times it continued after a restarted PS
// shard or chief); with loss scaling, gauge pstrain_worker_loss_scale and
// counter pstrain_worker_overflow_steps_total; the chief also
// pstrain_worker_test_accuracy (its latest evaluation).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/telemetry/metric_registry.h"
#include "proto/ps.pb.h"

namespace pstrain {

class WorkerMetrics {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerMetrics>> Register(MetricRegistry* registry, int worker);
  // After a step: `traffic` holds the bytes moved so far (Strategy::FillTraffic).
  void OnStep(int64_t steps_done, double loss, double images_per_sec, const WorkerReport& traffic, double wait_seconds);
  void OnEvaluation(double accuracy) { test_accuracy_->Set(accuracy); }
  void OnRecovery() { recoveries_->Add(); }
  // After a step with loss scaling: the scale for the next step, and the
  // overflowed steps so far (optim/loss_scaler.h).
  void OnLossScale(double scale, int64_t overflow_steps);

 private:
  WorkerMetrics() = default;
  Gauge* step_ = nullptr;
  Gauge* loss_ = nullptr;
  Gauge* images_per_sec_ = nullptr;
  Counter* pushed_ = nullptr;
  Counter* pulled_ = nullptr;
  Counter* allreduced_ = nullptr;
  Counter* wait_ = nullptr;
  Counter* recoveries_ = nullptr;
  Gauge* loss_scale_ = nullptr;
  Counter* overflow_steps_ = nullptr;
  Gauge* test_accuracy_ = nullptr;
};

}  // namespace pstrain
