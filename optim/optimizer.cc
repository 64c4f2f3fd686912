#include "optim/optimizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
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

// The ranges of the fields the optimizers read (optim/<name>.cc), checked
// whichever optimizer is named, as the proto documents them. `path` names the
// message in errors ("optimizer", "model.tables[0].optimizer"). Known names:
// sgd, momentum, adagrad, ftrl, adam (the CPU registry's, listed in the error).
absl::Status CheckOptimizerFields(absl::string_view path, const OptimizerConfig& o, const ConfigChecker& ck) {
  auto field = [&](absl::string_view name) { return absl::StrCat(path, ".", name); };
  PSTRAIN_RETURN_IF_ERROR(ck.OneOf(field("name"), o.name(), OptimizerRegistry(DeviceKind::kCpu).Names()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive(field("learning_rate"), o.learning_rate()));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange(field("momentum"), o.momentum(), 0.0f, true, 1.0f, false));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(field("weight_decay"), o.weight_decay()));
  // adagrad and ftrl: > 0 keeps their first update finite (they divide by
  // sqrt of the accumulator).
  PSTRAIN_RETURN_IF_ERROR(ck.Positive(field("initial_accumulator"), o.initial_accumulator()));
  // adam: 1 would leave the bias correction 1 / (1 - beta1^t) infinite.
  PSTRAIN_RETURN_IF_ERROR(ck.InRange(field("beta1"), o.beta1(), 0.0f, true, 1.0f, false));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange(field("beta2"), o.beta2(), 0.0f, true, 1.0f, false));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive(field("epsilon"), o.epsilon()));
  // ftrl.
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(field("l1"), o.l1()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative(field("l2"), o.l2()));
  return ck.NonNegative(field("ftrl_beta"), o.ftrl_beta());
}

// optimizer.name from the CPU registry (every optimizer has a CPU
// implementation) and the fields the optimizers read, of the experiment's
// optimizer and of each embedding table's own (model.tables[i].optimizer,
// where set; common/config/config_validate.cc checks the tables' other fields).
const bool kConfigCheck = ConfigCheckRegistry().Register(
    "optimizer", [](const ExperimentConfig& config, const ConfigChecker& ck) -> absl::Status {
      PSTRAIN_RETURN_IF_ERROR(CheckOptimizerFields("optimizer", config.optimizer(), ck));
      for (int i = 0; i < config.model().tables_size(); ++i) {
        const EmbeddingTableConfig& table = config.model().tables(i);
        if (!table.has_optimizer()) continue;
        PSTRAIN_RETURN_IF_ERROR(
            CheckOptimizerFields(absl::StrCat("model.tables[", i, "].optimizer"), table.optimizer(), ck));
      }
      return absl::OkStatus();
    });

}  // namespace
}  // namespace pstrain
