// ProgressLines: the tf_cnn_benchmarks-style progress line every
// `display_every` steps and at the last one ("step  images/sec: X +/- U
// (jitter = J)  loss"), the worker's throughput (warm-up steps excluded) and
// its initial and final loss (the means of the first and of the last 10
// steps' losses).
#pragma once

#include <cstdint>
#include <deque>
#include <ostream>
#include <vector>

#include "common/metrics/throughput.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

class ProgressLines : public StepObserver {
 public:
  // `examples_per_step`: this worker's examples per step (batch x devices);
  // `time_scale`: reported rates are the measured ones x this (time
  // dilation: every modelled time ran that much longer). Lines go to `out`.
  ProgressLines(int64_t examples_per_step, int64_t warmup_steps, int64_t display_every, int64_t total_steps,
                double time_scale, std::ostream& out);

  void OnStepEnd(const StepOutcome& outcome) override;
  // images_per_sec (+ stddev), x time_scale; initial_loss, final_loss.
  void AddToReport(WorkerReport* report) const override;

  // The rate measured on this machine, without time_scale.
  double measured_images_per_sec() const { return throughput_.mean_images_per_sec(); }

 private:
  static constexpr size_t kFinalLossSteps = 10;
  ThroughputTracker throughput_;
  const int64_t display_every_;
  const int64_t total_steps_;
  const double time_scale_;
  std::ostream& out_;
  std::deque<float> recent_losses_;
  std::vector<float> first_losses_;  // at most kFinalLossSteps
};

}  // namespace pstrain
