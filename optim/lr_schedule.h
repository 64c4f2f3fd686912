// Learning-rate schedules over global steps (optimizer.lr_schedule), one file
// each in optim/schedules/, registered by name with the check of the fields
// they read.
//
// A global step is one update of the whole model: a sync PS update, one step
// of a replicated or allreduce run, or num_workers async/ssp updates (the PS
// consistency policy converts). Schedules are pure functions of
// (config, global step, total steps of the run).
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "common/config/config_checks.h"
#include "common/registry.h"
#include "proto/config.pb.h"

namespace pstrain {

struct LrScheduleEntry {
  // The rate at `global_step` of a run of `total_steps` (0: unknown).
  std::function<float(const OptimizerConfig& config, int64_t global_step, int64_t total_steps)> rate;
  // Checks the optimizer fields the schedule reads beyond learning_rate
  // (null: none).
  std::function<absl::Status(const OptimizerConfig& config, const ConfigChecker& check)> check;
};

Registry<LrScheduleEntry>& LrScheduleRegistry();

// One run's schedule: config.lr_schedule() resolved once.
class LearningRateSchedule {
 public:
  // NotFound (listing the known schedules) for an unknown lr_schedule.
  static absl::StatusOr<LearningRateSchedule> Create(const OptimizerConfig& config, int64_t total_steps);
  float At(int64_t global_step) const { return entry_.rate(config_, global_step, total_steps_); }

 private:
  LearningRateSchedule(OptimizerConfig config, int64_t total_steps, LrScheduleEntry entry)
      : config_(std::move(config)), total_steps_(total_steps), entry_(std::move(entry)) {}
  OptimizerConfig config_;
  int64_t total_steps_;
  LrScheduleEntry entry_;
};

}  // namespace pstrain
