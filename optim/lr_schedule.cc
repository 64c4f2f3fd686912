#include "optim/lr_schedule.h"

#include "absl/strings/str_cat.h"
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
      // The experiment's optimizer, then each table's own (model.tables).
      auto check = [&ck](const std::string& path, const OptimizerConfig& o) -> absl::Status {
        PSTRAIN_RETURN_IF_ERROR(ck.OneOf(path, o.lr_schedule(), LrScheduleRegistry().Names()));
        PSTRAIN_ASSIGN_OR_RETURN(LrScheduleEntry entry, LrScheduleRegistry().Find(o.lr_schedule()));
        return entry.check ? entry.check(o, ck) : absl::OkStatus();
      };
      PSTRAIN_RETURN_IF_ERROR(check("optimizer.lr_schedule", config.optimizer()));
      for (int i = 0; i < config.model().tables_size(); ++i) {
        const EmbeddingTableConfig& t = config.model().tables(i);
        if (t.has_optimizer()) {
          PSTRAIN_RETURN_IF_ERROR(check(absl::StrCat("model.tables[", i, "].optimizer.lr_schedule"), t.optimizer()));
        }
      }
      return absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
