// LocalReplicasStrategy: the strategies without parameter servers that run
// the devices of ONE worker, each replica applying the optimizer to its own
// copy of the variables after every step:
//   replicated   the replicas' gradients are first reduced to their mean
//                (all_reduce_spec, worker/local_reduce.h), so every copy
//                takes the same update
//   independent  no reduction: every replica trains on its own
// (replicated with all_reduce_spec nccl on GPUs is the NCCL strategy.)
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/local_optimizer.h"
#include "worker/overlapped_reduce.h"
#include "worker/strategy.h"

namespace pstrain {

class LocalReplicasStrategy : public Strategy {
 public:
  // `reduce_spec`: the all_reduce_spec reducing the gradients before each
  // update, or none. `description`: Describe()'s line. One worker (the
  // strategies' needs say so).
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context,
                                                          std::optional<std::string> reduce_spec,
                                                          std::string description);

  absl::StatusOr<int64_t> Start() override;
  absl::Status BeforeStep(int64_t) override { return absl::OkStatus(); }
  absl::Status AfterStep(int64_t step) override;
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override;
  std::string Describe() const override { return description_; }
  // With a reduction that runs per variable (LocalReduceEntry::reduce_one):
  // each variable is reduced as soon as every replica's gradient of it is
  // final, overlapping backward.
  GradientReadyHook HookFor(int replica) override { return overlapped_ ? overlapped_->HookFor(replica) : nullptr; }

 private:
  LocalReplicasStrategy(const StrategyContext& context, std::optional<std::string> reduce_spec, std::string description)
      : context_(context), reduce_spec_(std::move(reduce_spec)), description_(std::move(description)) {}

  // With host mirrors (GPU replicas), no value is uploaded before a step:
  // the forward's wait for each variable uploads it (ReplicaSet::
  // UploadValue), so a layer waits for its own variables' copies only and
  // the uploads overlap the layers before it.
  void UploadEachValueAsTheForwardReadsIt();

  StrategyContext context_;
  const std::optional<std::string> reduce_spec_;
  const std::string description_;
  std::vector<std::unique_ptr<LocalOptimizer>> optimizers_;
  std::unique_ptr<OverlappedReduce> overlapped_;
};

}  // namespace pstrain
