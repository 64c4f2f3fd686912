// ParameterServerStrategy: variables live on the PS shards.
//
//   BeforeStep: pull into replica 0 (sync: the version produced by the last
//               step; ssp: wait for laggards; async: latest), copy to the other
//               replicas.
//   AfterStep:  sum the replicas' gradients in this worker (on the host for
//               "parameter_server", by all_reduce_spec for
//               "distributed_replicated"), push the worker's mean gradient once.
//               With one replica there is nothing to sum: each RPC batch is
//               pushed from the gradient-ready hook as soon as all of its
//               gradients are final, overlapping the rest of backward, and
//               AfterStep only waits for the acknowledgements.
//   Checkpoints (chief, `checkpoint:`): Start resumes from the newest valid
//               checkpoint (the shards restore it in Init); BeforeStep, once
//               its pull returned (sync: every variable at version `step`,
//               and no worker can move past it before the chief pushes),
//               has every shard write its state and commits the manifest.
//   Recovery (timeouts.ps_recover_seconds > 0): when a shard dies or is
//               restored, the failing step is abandoned; the chief waits for
//               every shard to answer again and installs the newest
//               committed checkpoint (or the initial values) at a new
//               generation; every worker then pulls that state and
//               continues from its step. A restarted non-chief worker
//               rejoins the running state (sync: at the step being
//               aggregated; async and ssp: after its last pushed step).
//   Finish:     non-chief: Done with its report. Chief: wait for the others'
//               reports, pull the final parameters, Done.
//   Pipeline (ps_scheduling.pipeline; worker/ps_pipeline.h): the hooks of
//               every replica feed a PsPipeline, which pushes batches in the
//               next forward's order and pulls each as soon as its push is
//               acknowledged; BeforeStep pulls nothing, the forward waits per
//               layer, AfterStep waits for the step's acknowledgements only.
//   Membership (elastic; parameter_server_elastic.cc): with
//               elastic.min_workers, Start waits until that many workers are
//               present, and a worker that appears later joins at the step
//               being aggregated; with data.sharding dynamic the chief sets
//               up the data ledger on shard 0 (restored with the checkpoint)
//               and every checkpoint records the chunks it has trained.
// A heartbeat thread tells every shard this worker is alive.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/periodic_thread.h"
#include "worker/checkpoint_manager.h"
#include "worker/pipeline_tuning.h"
#include "worker/ps_client.h"
#include "worker/ps_pipeline.h"
#include "worker/strategy.h"

namespace pstrain {

class ParameterServerStrategy : public Strategy, public ShardSession {
 public:
  // `local_reduce_spec`: how the replicas' gradients are combined before the
  // push ("pscpu" or "none").
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context, std::string name,
                                                          std::string local_reduce_spec);
  ~ParameterServerStrategy() override;

  absl::StatusOr<int64_t> Start() override;
  absl::Status BeforeStep(int64_t step) override;
  absl::Status AfterStep(int64_t step) override;
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override;
  std::string Describe() const override;
  GradientReadyHook HookFor(int replica) override;
  StrategyTraffic traffic() const override;
  ShardSession* shards() override { return this; }

  // ShardSession.
  int64_t generation() const override { return client_->generation(); }
  absl::StatusOr<int64_t> Recover(const absl::Status& failure) override;
  std::vector<Recovery> recoveries() const override { return recoveries_; }
  absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>& completed) override;
  absl::Status PauseSteps() override;
  absl::StatusOr<int64_t> ResumeSteps(int64_t next_step) override;
  bool watches_stragglers() const override { return true; }
  std::vector<Straggler> stragglers() const override { return client_->pace().stragglers(); }
  LayoutTuning layout_tuning() const override { return tuning_ != nullptr ? tuning_->Record() : LayoutTuning(); }

 private:
  ParameterServerStrategy(const StrategyContext& context, std::string name, std::string local_reduce_spec)
      : context_(context), name_(std::move(name)), local_reduce_spec_(std::move(local_reduce_spec)) {}
  void StopHeartbeats();
  // A heartbeat to every shard with this worker's step and state (finished
  // pushing, paused). One at a time, so the shards see the states in order.
  absl::Status SendHeartbeat() ABSL_LOCKS_EXCLUDED(heartbeat_mu_);
  // Chief: every shard writes its state at `step`; the manifest commits it.
  absl::Status SaveCheckpoint(int64_t step);
  // Chief: installs the run's state on every shard (at a new generation)
  // from the newest valid checkpoint, or from the values in replica 0 when
  // there is none (`recovering`: reset to the initial values first); waits
  // up to `wait` for the shards. Returns the checkpoint installed, if any.
  absl::StatusOr<std::optional<RestorePoint>> InstallState(absl::Duration wait, bool recovering);
  // Takes the state of the shards' generation `min_generation` (or later)
  // as the one to train on; sets start_step_. `starting`: the worker's
  // first join (a restarted non-chief worker rejoins the running step).
  absl::Status JoinShards(int64_t min_generation, absl::Duration wait, bool starting);

  // Membership and the data ledger (parameter_server_elastic.cc).
  // Whether workers may join after the start (elastic.min_workers below the
  // listed workers).
  bool WorkersJoin() const;
  // Waits up to `wait` until elastic.min_workers workers are present.
  absl::Status WaitForMinWorkers(absl::Duration wait);
  // The ledger to install with the run's state: context_.ledger with the
  // chunks `restore` had completed; nullopt with static sharding.
  std::optional<LedgerSpec> LedgerToInstall(const std::optional<RestorePoint>& restore) const;
  // The ledger's chunks trained before `step`, for the checkpoint at `step`
  // (nullopt with static sharding).
  absl::StatusOr<std::optional<LedgerState>> LedgerAt(int64_t step);
  // Chief, at the end: shard 0's record of membership and the ledger.
  void AddMembership(const StatsResponse& shard0, ClusterReport* report) const;
  // Overlap (one replica): marks as sent, and returns, every batch whose
  // gradients are all ready; the caller sends them after releasing the lock
  // (an in-process transport may answer inline).
  std::vector<int> TakeReadyBatches() ABSL_EXCLUSIVE_LOCKS_REQUIRED(overlap_mu_);
  void SendBatches(const std::vector<int>& batches);
  // BeforeStep and AfterStep of the pipeline.
  absl::Status BeforePipelinedStep(int64_t step);
  // AfterStep's pushes of the step's gradients (through the pipeline, the
  // overlapped batches, or at once).
  absl::Status Push(int64_t step);

  StrategyContext context_;
  std::string name_;
  std::string local_reduce_spec_;
  std::unique_ptr<PsClient> client_;
  // ps_scheduling.pipeline (null otherwise).
  std::unique_ptr<PsPipeline> pipeline_;
  // ps_scheduling.tune with the pipeline (null otherwise).
  std::unique_ptr<PipelineTuning> tuning_;
  // Chief with `checkpoint:` configured (worker/checkpoint_manager.h).
  std::unique_ptr<CheckpointManager> checkpoints_;
  int64_t start_step_ = 0;
  std::vector<Recovery> recoveries_;
  // Start pulled the values the first step trains on.
  bool pulled_at_start_ = false;
  int64_t pulled_version_ = -1;
  int64_t dropped_ = 0;
  absl::Duration pull_wait_;
  std::atomic<int64_t> current_step_{0};
  // When the current step began, and the time waited for others by then.
  absl::Time step_start_;
  absl::Duration wait_at_step_start_;
  std::atomic<bool> finished_pushing_{false};
  std::atomic<bool> paused_{false};  // PauseSteps until ResumeSteps
  absl::Mutex heartbeat_mu_;
  std::unique_ptr<PeriodicThread> heartbeats_;  // from Start on

  // Overlapped pushes of the current step (one replica only).
  bool overlap_ = false;
  int64_t step_ = 0;
  std::vector<std::vector<int>> batch_variables_;
  absl::Mutex overlap_mu_;
  std::vector<bool> ready_ ABSL_GUARDED_BY(overlap_mu_);
  std::vector<bool> sent_ ABSL_GUARDED_BY(overlap_mu_);
  int acknowledged_ ABSL_GUARDED_BY(overlap_mu_) = 0;
  int step_dropped_ ABSL_GUARDED_BY(overlap_mu_) = 0;
  absl::Status push_error_ ABSL_GUARDED_BY(overlap_mu_);
};

}  // namespace pstrain
