// PsShard: one parameter-server shard's state and rules, independent of the
// transport (ps_service.h adapts it to frames).
//
// Variables arrive with the chief's Init. Each keeps its published value as an
// immutable buffer: an update writes a fresh buffer (recycling the previous
// one once no pull still sends it) and bumps the variable's version, so pulls
// send values without copying and without holding locks.
//
// Consistency:
//   sync:  a push for step t == version accumulates; when replicas_to_aggregate
//          workers have pushed step t, the average is applied once (version
//          t+1). Pushes for an already-applied step are dropped and reported.
//          Once workers finish, a step needs no more gradients than there are
//          workers left (so backup-worker runs end cleanly).
//   async: every push is applied on arrival.
//   ssp:   pushes are applied on arrival (as async), but a pull by a worker
//          about to run local step t waits until every live worker has
//          completed at least t - staleness steps (stale synchronous parallel).
// A malformed request (unknown variable, wrong dtype, shape or byte count,
// future step, worker out of range, duplicate gradient) is INVALID_ARGUMENT and
// changes nothing.
//
// Thread-safe: requests arrive concurrently from transport threads.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "ps/optimizer.h"

namespace pstrain {

struct PsShardOptions {
  int shard_index = 0;
  int num_workers = 1;
  std::string consistency = "sync";
  int replicas_to_aggregate = 0;  // 0: every worker
  int staleness = 0;              // ssp only
  OptimizerConfig optimizer;
  TimeoutConfig timeouts;
};

class PsShard {
 public:
  static absl::StatusOr<std::unique_ptr<PsShard>> Create(const PsShardOptions& options);
  ~PsShard();

  absl::Status Init(const InitRequest& request, IncomingFrame& payload, InitResponse* response);
  // Answers through `respond` now, or later once every requested variable has
  // reached request.min_version (or the request's timeout expires).
  void Pull(const PullRequest& request, Responder respond);
  absl::Status Push(const PushRequest& request, IncomingFrame& payload, PushResponse* response);
  absl::Status Heartbeat(const HeartbeatRequest& request);
  absl::Status Done(const DoneRequest& request);
  StatsResponse Stats() const;

  // Periodic duty (the runner calls it every ~100 ms): answers expired pulls,
  // and returns an error naming the culprit when a sync step has waited longer
  // than sync_step_seconds or, in sync mode, a worker is lost. In async mode a
  // lost worker is logged and stops being waited for.
  absl::Status Check(absl::Time now);
  // Answers every parked pull with `status` (before the shard stops serving,
  // so no caller is left waiting).
  void CancelPendingPulls(const absl::Status& status);
  // True when every worker has said Done or is lost.
  bool Finished() const;
  std::vector<int> LostWorkers() const;

 private:
  struct Variable;
  class VariableLocks;
  struct PendingPull {
    PullRequest request;
    Responder respond;
    absl::Time deadline;
    absl::Time parked_at;
  };

  explicit PsShard(const PsShardOptions& options, std::unique_ptr<Optimizer> optimizer);
  absl::Status ValidateWorker(int worker, const char* what) const;
  // Null when not ready yet; an error status when the request is bad.
  absl::StatusOr<bool> TryServePull(const PullRequest& request, OutgoingFrame* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The optimizer's learning rate for the variable's next update.
  float CurrentLearningRate(const Variable& var) const;
  // Averages `grad` in place by `scale` and applies it (var.mu held).
  void ApplyUpdate(Variable& var, float* grad, float scale) const;
  absl::Status InstallVariables(const InitRequest& request, IncomingFrame& payload, InitResponse* response);
  void WakePulls();
  std::string DescribeWait(const PullRequest& request) const;
  // ssp: workers (not done, not lost) that have completed fewer than
  // request.local_step - staleness steps. Empty when the pull may proceed.
  std::vector<int> SspLaggards(const PullRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> MissingContributors(const Variable& var) const;

  const PsShardOptions options_;
  const int replicas_;  // gradients aggregated per sync step (while enough workers remain)
  // Workers that are done or lost (readable under a variable's lock). A sync
  // step never waits for more gradients than the workers that have sent one
  // for it or may still send one.
  std::unique_ptr<std::atomic<bool>[]> departed_;
  int ReplicasNeeded(const Variable& var) const;
  // After a worker leaves: applies sync steps that now have enough gradients.
  void ApplyCompleteSyncSteps();
  const std::unique_ptr<Optimizer> optimizer_;
  const absl::Time start_time_;

  std::atomic<bool> initialized_{false};
  int64_t total_steps_ = 0;  // set once by Init
  // Immutable once initialized_ is true.
  std::map<std::string, std::unique_ptr<Variable>> variables_;

  mutable absl::Mutex mu_;
  std::vector<PendingPull> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> last_seen_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> last_step_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> completed_steps_ ABSL_GUARDED_BY(mu_);  // ssp clocks
  std::vector<bool> seen_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> done_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> lost_ ABSL_GUARDED_BY(mu_);
  std::vector<WorkerReport> reports_ ABSL_GUARDED_BY(mu_);

  // Load counters.
  std::atomic<int64_t> bytes_in_{0};
  std::atomic<int64_t> bytes_out_{0};
  std::atomic<int64_t> applied_updates_{0};
  std::atomic<int64_t> dropped_gradients_{0};
  std::atomic<int64_t> apply_nanos_{0};
  int64_t ssp_blocked_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration ssp_wait_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
