#include "optim/optimizer.h"

#include "common/config/config_checks.h"
#include "common/status_macros.h"

namespace pstrain {

Registry<OptimizerFactory>& OptimizerRegistry(DeviceKind kind) {
  static auto* cpu = new Registry<OptimizerFactory>("optimizer");
  static auto* cuda = new Registry<OptimizerFactory>("optimizer on cuda");
  return kind == DeviceKind::kCpu ? *cpu : *cuda;
}

absl::StatusOr<std::unique_ptr<Optimizer>> CreateOptimizer(const OptimizerConfig& config, DeviceKind kind,
                                                           DeviceStream stream) {
  PSTRAIN_ASSIGN_OR_RETURN(OptimizerFactory factory, OptimizerRegistry(kind).Find(config.name()));
  return factory(config, stream);
}

namespace {

// optimizer.name from the CPU registry (every optimizer has a CPU
// implementation) and the fields every optimizer reads.
const bool kConfigCheck = ConfigCheckRegistry().Register(
    "optimizer", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      const OptimizerConfig& o = config.optimizer();
      PSTRAIN_RETURN_IF_ERROR(ck.OneOf("optimizer.name", o.name(), OptimizerRegistry(DeviceKind::kCpu).Names()));
      PSTRAIN_RETURN_IF_ERROR(ck.Positive("optimizer.learning_rate", o.learning_rate()));
      PSTRAIN_RETURN_IF_ERROR(ck.InRange("optimizer.momentum", o.momentum(), 0.0f, true, 1.0f, false));
      return ck.NonNegative("optimizer.weight_decay", o.weight_decay());
    });

}  // namespace
}  // namespace pstrain
