// LossScaling: moves the loss scale after every synchronised step (config
// `loss_scaling`; optim/loss_scaler.h). The replicas divide each gradient by
// the scale as backward finalises it and note whether it stayed finite
// (ReplicaSet::SetLossScale, gradients_finite); after a step whose AfterStep
// succeeded, an overflow on any replica counts as the step's overflow, the
// scaler moves, and the replicas get the next step's scale. Whether the
// overflowed update was skipped is the strategy's (LocalOptimizer skips it;
// towards parameter servers it travelled as zeros).
#pragma once

#include <string>
#include <vector>

#include "optim/loss_scaler.h"
#include "worker/replica_set.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

class LossScaling : public StepObserver {
 public:
  // Sets the replicas' scale to the scaler's initial one. `mode` names it in
  // the summary line ("dynamic").
  LossScaling(LossScaler scaler, std::string mode, ReplicaSet* replicas, int worker_index);

  void OnStepEnd(const StepOutcome& outcome) override;
  // overflow_steps and loss_scale.
  void AddToReport(WorkerReport* report) const override;
  // "worker 0 loss scaling (dynamic): 0 of 1404 steps overflowed, final scale 262144"
  std::vector<std::string> SummaryLines() const override;

  const LossScaler& scaler() const { return scaler_; }

 private:
  LossScaler scaler_;
  const std::string mode_;
  ReplicaSet* const replicas_;
  const int worker_index_;
  int64_t steps_ = 0;  // synchronised steps seen
};

}  // namespace pstrain
