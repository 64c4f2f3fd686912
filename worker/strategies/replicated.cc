// replicated: the devices of ONE worker each own a full copy of the variables;
// after backward, gradients are all-reduced across the replicas
// (all_reduce_spec: pscpu = summed on the host, none = summed on one replica
// chosen round-robin per variable; nccl on GPUs: worker/strategies/
// nccl_allreduce.cc), and every replica applies the same update.
// No parameter servers. Across workers use distributed_replicated or allreduce.
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/local_optimizer.h"
#include "worker/local_reduce.h"
#include "worker/strategies/nccl_strategy.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

class ReplicatedStrategy : public Strategy {
 public:
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context) {
    if (context.num_workers != 1) {
      return absl::InvalidArgumentError(
          "variable_update replicated synchronises the devices of one worker; across workers use "
          "distributed_replicated or allreduce");
    }
    if (UsesNccl(*context.config)) return CreateNcclStrategy(context);
    std::unique_ptr<ReplicatedStrategy> s(new ReplicatedStrategy(context));
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
    PSTRAIN_RETURN_IF_ERROR(ReduceGradients(spec(), *context_.replicas));
    context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step); });
    return absl::OkStatus();
  }
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override {
    ClusterReport report;
    report.workers.push_back(mine);
    return report;
  }
  std::string Describe() const override {
    return absl::StrCat("replicated (all_reduce_spec ", spec(), ", ", context_.replicas->size(), " replicas)");
  }

 private:
  explicit ReplicatedStrategy(const StrategyContext& context) : context_(context) {}
  std::string spec() const {
    return context_.config->all_reduce_spec().empty() ? "pscpu" : context_.config->all_reduce_spec();
  }
  StrategyContext context_;
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
};

const bool kRegistered = RegisterStrategy("replicated", ReplicatedStrategy::Create);

}  // namespace
}  // namespace pstrain
