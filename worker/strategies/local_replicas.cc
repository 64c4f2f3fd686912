#include "worker/strategies/local_replicas.h"

#include <utility>

#include "common/status_macros.h"
#include "worker/local_reduce.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<Strategy>> LocalReplicasStrategy::Create(const StrategyContext& context,
                                                                        std::optional<std::string> reduce_spec,
                                                                        std::string description) {
  std::unique_ptr<LocalReplicasStrategy> s(
      new LocalReplicasStrategy(context, std::move(reduce_spec), std::move(description)));
  PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_,
                           LocalOptimizer::ForReplicas(*context.config, *context.replicas, context.total_steps));
  return std::unique_ptr<Strategy>(std::move(s));
}

absl::Status LocalReplicasStrategy::Start() {
  context_.replicas->BroadcastValues(0);
  return absl::OkStatus();
}

absl::Status LocalReplicasStrategy::AfterStep(int64_t step) {
  if (reduce_spec_) PSTRAIN_RETURN_IF_ERROR(ReduceGradients(*reduce_spec_, *context_.replicas));
  context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step); });
  return absl::OkStatus();
}

absl::StatusOr<ClusterReport> LocalReplicasStrategy::Finish(const WorkerReport& mine) {
  ClusterReport report;
  report.workers.push_back(mine);
  return report;
}

}  // namespace pstrain
