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
  // Over an emulated interconnect the devices' updates are not computed
  // (AfterStep), so they need no optimizer state.
  if (context.replicas->interconnect() == nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(s->optimizers_,
                             LocalOptimizer::ForReplicas(*context.config, *context.replicas, context.total_steps));
  }
  if (s->reduce_spec_ && context.replicas->size() > 1) {
    absl::StatusOr<LocalReduceEntry> entry = LocalReduceRegistry().Find(*s->reduce_spec_);
    if (entry.ok() && entry->reduce_one) {
      s->overlapped_ = std::make_unique<OverlappedReduce>(*context.replicas, entry->reduce_one);
    }
  }
  return std::unique_ptr<Strategy>(std::move(s));
}

absl::StatusOr<int64_t> LocalReplicasStrategy::Start() {
  context_.replicas->BroadcastValues(0);
  UploadEachValueAsTheForwardReadsIt();
  return 0;
}

void LocalReplicasStrategy::UploadEachValueAsTheForwardReadsIt() {
  ReplicaSet& replicas = *context_.replicas;
  // An emulated interconnect models the uploads itself, before each step.
  if (replicas.interconnect() != nullptr) return;
  replicas.UploadValuesOnWait();
  if (!replicas.uploads_values_on_wait()) return;  // no host mirrors: nothing to upload
  for (int r = 0; r < replicas.size(); ++r) {
    replicas.model(r).SetVariableWait([&replicas, r](int variable) { replicas.UploadValue(r, variable); });
  }
}

absl::Status LocalReplicasStrategy::AfterStep(int64_t step) {
  if (overlapped_) {
    overlapped_->Finish();
  } else if (reduce_spec_) {
    PSTRAIN_RETURN_IF_ERROR(ReduceGradients(*reduce_spec_, *context_.replicas));
  }
  // Over an emulated interconnect the update is the emulated devices'
  // compute: not modelled (a few passes over the variables at the device's
  // memory bandwidth, under 1% of a step for the zoo's models) and not
  // computed (their gradients are zeros; an emulated run reports rates).
  if (optimizers_.empty()) return absl::OkStatus();
  context_.replicas->ForEach([&](int r) { optimizers_[r]->Apply(context_.replicas->variables(r), step); });
  return absl::OkStatus();
}

absl::StatusOr<ClusterReport> LocalReplicasStrategy::Finish(const WorkerReport& mine) {
  ClusterReport report;
  report.workers.push_back(mine);
  return report;
}

}  // namespace pstrain
