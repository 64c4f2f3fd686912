// PsPipeline: a worker's parameter-server traffic scheduled as BytePS does
// it (config ps_scheduling.pipeline; docs/STRATEGIES.md, "The pipeline"):
//
//   backward  as every replica finalises a variable's gradient, their mean
//             is formed in replica 0 (host memory, replicas summed in order);
//             an RPC batch (PsClient) whose variables are all final joins the
//             push queue;
//   pushes    the queue goes out in the order the next forward needs it (the
//             batch holding the lowest variable index first), with at most
//             window_bytes in flight (a larger batch goes alone) and at most
//             pushes_per_shard to any one shard (a batch whose shard is
//             busy lets the next one to another shard go first);
//   pulls     as soon as this worker's push of a batch is acknowledged, the
//             batch is pulled (sync: one version past the one it pushed,
//             which the shard answers once every worker's gradient of it is
//             applied; async: the latest). The answer is read into replica
//             0's variables, whose values this step no longer reads (their
//             gradients are final);
//   forward   the next step's forward waits layer by layer for the
//             variables it reads (VariableWait); replica r > 0 copies each
//             one from replica 0 as it arrives. GPU replicas (host mirrors)
//             then upload it on their copy stream (ReplicaSet::UploadValue),
//             and the layer's compute waits for that copy alone; their
//             gradients reach the backward hooks as each one's download
//             completes (ReplicaSet, device/copy_engine.h).
//
// A push or pull that fails fails the step (FinishStep) and releases every
// waiting forward; the strategy then recovers, calling Abandon before it
// installs or joins the shards' state and ValuesInPlace after. Thread-safe:
// hooks run on the replicas' threads, completions on transport threads, the
// rest on the training thread.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "models/model.h"
#include "worker/layout_tuner.h"
#include "worker/ps_client.h"
#include "worker/push_admission.h"
#include "worker/replica_set.h"
#include "worker/timeline.h"

namespace pstrain {

// Whether `config` runs the pipeline: ps_scheduling.pipeline when the config
// sets it (true is refused where the pipeline does not apply), else on
// wherever it applies: a strategy with parameter servers, consistency sync
// or async, device cpu or emulated (device gpu: when asked for).
bool PipelineOn(const ExperimentConfig& config);

class PsPipeline {
 public:
  // `client` and `replicas` (host variables) outlive the pipeline;
  // `timeline` may be null.
  PsPipeline(PsClient* client, ReplicaSet* replicas, const ExperimentConfig& config, Timeline* timeline);

  // Every replica's variables hold the state of the shards at `version`
  // (after Start's join, or a recovery): the next forward waits for nothing.
  void ValuesInPlace(int64_t version) ABSL_LOCKS_EXCLUDED(mu_);
  // Step `step` starts (before its forward).
  void BeginStep(int64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  GradientReadyHook HookFor(int replica);
  VariableWait WaitFor(int replica);
  // Backward has ended on every replica: pushes what is left and waits for
  // every push of the step to be acknowledged. Returns the gradients the
  // shards dropped as stale, or the first push or pull failure.
  absl::StatusOr<int> FinishStep() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every pull issued so far has landed; returns the smallest
  // version among the variables' values, or the first failure.
  absl::StatusOr<int64_t> WaitForPulls() ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets every push and pull in flight (their answers are dropped) and
  // waits until none is being read into the variables or handed to the
  // client: no push of the abandoned step goes out after it returns.
  void Abandon() ABSL_LOCKS_EXCLUDED(mu_);
  // Between steps, with no push or pull in flight (after FinishStep and
  // WaitForPulls): the client's RPC batches of `layout.batch_bytes`, a
  // push window of `layout.window_bytes` and `layout.pushes_per_shard` from
  // the next step on; every
  // variable's value is at `version` (what WaitForPulls returned).
  void Relayout(const TransferLayout& layout, int64_t version) ABSL_LOCKS_EXCLUDED(mu_);
  // Time forward spent waiting for variables so far.
  absl::Duration wait_time() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Send {
    int batch;
    int64_t version;  // the version its gradients were computed on
    // The epoch and step it was chosen in: a push chosen before an Abandon
    // is not sent after it.
    int64_t epoch;
    int64_t step;
  };
  // The client's batches as they are now; every batch's value at `version`.
  void TakeBatches(int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnGradientFinal(int replica, int variable) ABSL_LOCKS_EXCLUDED(mu_);
  void WaitForVariable(int replica, int variable) ABSL_LOCKS_EXCLUDED(mu_);
  // Replica 0's gradient of `variable` becomes the mean over the replicas.
  void MeanIntoReplicaZero(int variable);
  // `variable`'s mean is in replica 0: its batches may be queued.
  void MarkReduced(int variable, std::vector<Send>* sends) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes queued batches, highest priority first, while the window allows.
  void Pump(std::vector<Send>* sends) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendPushes(const std::vector<Send>& sends) ABSL_LOCKS_EXCLUDED(mu_);
  void OnPushed(int64_t epoch, int batch, absl::Time sent, absl::Status status, int dropped) ABSL_LOCKS_EXCLUDED(mu_);
  void StartPull(int64_t epoch, int batch, int64_t min_version) ABSL_LOCKS_EXCLUDED(mu_);
  void OnPulled(int64_t epoch, int batch, absl::Time sent, absl::Status status, IncomingFrame response)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Fail(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  PsClient* const client_;
  ReplicaSet* const replicas_;
  Timeline* const timeline_;
  const bool sync_;
  const absl::Duration pull_timeout_;
  const int num_replicas_;

  mutable absl::Mutex mu_;
  int64_t window_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t pushes_per_shard_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no limit
  // The client's RPC batches (changed only by Relayout): per batch its
  // variables, bytes, shard and priority (its lowest variable index); per
  // variable its batches.
  std::vector<std::vector<int>> batch_variables_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> batch_bytes_ ABSL_GUARDED_BY(mu_);
  std::vector<int> batch_shard_ ABSL_GUARDED_BY(mu_);
  std::vector<int> batch_priority_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int>> variable_batches_ ABSL_GUARDED_BY(mu_);
  // Answers of calls made before the last Abandon are dropped.
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  // This step's gradients and pushes.
  std::vector<int> final_replicas_ ABSL_GUARDED_BY(mu_);  // per variable
  std::vector<bool> reduced_ ABSL_GUARDED_BY(mu_);        // per variable
  std::vector<int> unreduced_in_batch_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<int, int>> queue_ ABSL_GUARDED_BY(mu_);  // (priority, batch)
  PushAdmission admission_ ABSL_GUARDED_BY(mu_);  // the pushes in flight, by window_bytes_ and pushes_per_shard_
  int acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  int dropped_ ABSL_GUARDED_BY(mu_) = 0;
  // Values: per batch the version its last pull brought (what its next push
  // is computed on); per variable the pulls still to land and how many have
  // landed in all; per replica > 0 that count when it last copied the
  // variable from replica 0.
  std::vector<int64_t> batch_version_ ABSL_GUARDED_BY(mu_);
  std::vector<int> missing_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> value_serial_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int64_t>> copied_serial_ ABSL_GUARDED_BY(mu_);
  int pulls_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int reading_ ABSL_GUARDED_BY(mu_) = 0;  // answers being read into the variables
  int sending_ ABSL_GUARDED_BY(mu_) = 0;  // pushes being handed to the client
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  absl::Duration wait_time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
