#include "optim/lr_schedule.h"

#include "common/status_macros.h"

namespace pstrain {

Registry<LrScheduleEntry>& LrScheduleRegistry() {
  static auto* registry = new Registry<LrScheduleEntry>("lr_schedule");
  return *registry;
}

absl::StatusOr<LearningRateSchedule> LearningRateSchedule::Create(const OptimizerConfig& config, int64_t total_steps) {
  PSTRAIN_ASSIGN_OR_RETURN(LrScheduleEntry entry, LrScheduleRegistry().Find(config.lr_schedule()));
  return LearningRateSchedule(config, total_steps, std::move(entry));
}

namespace {

const bool kConfigCheck = ConfigCheckRegistry().Register(
    "optimizer.lr_schedule", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      const OptimizerConfig& o = config.optimizer();
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("optimizer.lr_schedule", o.lr_schedule(), LrScheduleRegistry().Names()));
      PSTRAIN_ASSIGN_OR_RETURN(LrScheduleEntry entry, LrScheduleRegistry().Find(o.lr_schedule()));
      return entry.check ? entry.check(o, ck) : absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
