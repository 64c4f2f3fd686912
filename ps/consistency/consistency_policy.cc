#include "ps/consistency/consistency_policy.h"

#include "common/status_macros.h"

namespace pstrain {

Registry<ConsistencyEntry>& ConsistencyRegistry() {
  static auto* registry = new Registry<ConsistencyEntry>("consistency");
  return *registry;
}

absl::StatusOr<std::unique_ptr<ConsistencyPolicy>> CreateConsistencyPolicy(const std::string& consistency,
                                                                           const ConsistencyOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(ConsistencyEntry entry, ConsistencyRegistry().Find(consistency));
  return entry.create(options);
}

namespace {

const bool kConfigCheck = ConfigCheckRegistry().Register(
    "consistency", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("consistency", config.consistency(), ConsistencyRegistry().Names()));
      PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("staleness", config.staleness()));
      PSTRAIN_ASSIGN_OR_RETURN(ConsistencyEntry entry, ConsistencyRegistry().Find(config.consistency()));
      return entry.check ? entry.check(config, ck) : absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
