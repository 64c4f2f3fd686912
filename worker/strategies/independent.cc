// independent: no synchronisation at all. Every replica trains its own copy
// on its own data and applies its own gradients: the throughput ceiling the
// synchronising strategies are compared against. The chief evaluates its
// replica 0. Only one worker (several would have no way to report).
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/local_optimizer.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

class IndependentStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
    if (context.num_workers != 1) {
      return absl::InvalidArgumentError(
          "variable_update independent runs the devices of one worker; give it one worker_host");
    }
    std::unique_ptr<IndependentStrategy> s(new IndependentStrategy(context));
    PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_, LocalOptimizer::ForReplicas(context.config->optimizer(),
                                                                        *context.replicas, context.total_steps));
    return std::unique_ptr<Strategy>(std::move(s));
  }

  absl::Status Start() override {
    context_.replicas->BroadcastValues(0);
    return absl::OkStatus();
  }
  absl::Status BeforeStep(int64_t) override { return absl::OkStatus(); }
  absl::Status AfterStep(int64_t step) override {
    context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step); });
    return absl::OkStatus();
  }
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    ClusterReport report;
    report.workers.push_back(mine);
    return report;
  }
  std::string Describe() const override {
    return absl::StrCat("independent (", context_.replicas->size(), " replicas, no synchronisation)");
  }

 private:
  explicit IndependentStrategy(const StrategyContext& context) : context_(context) {}
  StrategyContext context_;
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
};

const bool kRegistered = RegisterStrategy("independent", IndependentStrategy::Create);

}  // namespace
}  // namespace pstrain
