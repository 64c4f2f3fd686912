// PsShard: one parameter-server shard's state and rules, independent of the
// transport (ps_service.h adapts it to frames).
//
// Variables arrive with the chief's Init (ShardVariable: published values
// that pulls send without copying). What a push does and what a pull waits
// for besides versions are the consistency policy's
// (ps/consistency/consistency_policy.h: sync, async, ssp), chosen once at
// creation. The shard itself validates requests, keeps the workers' liveness
// and progress, parks pulls until they can be answered, and reports load.
//
// PsShard is the facade over its parts (ps/shard/): VariableStore (the
// variables and the generation they belong to), ShardMembership (who takes
// part: the roster of workers, membership changes, the data ledger) and
// ParkedPulls (pulls waiting to be answered). Its own code is split by
// concern: Init and generations in init.cc, pulls in pull.cc, pushes in
// push.cc, embedding tables in sparse.cc, workers, Check and Stats in
// shard.cc.
//
// A malformed request (unknown variable, wrong dtype, shape or byte count,
// future step, worker out of range, duplicate gradient) is INVALID_ARGUMENT and
// changes nothing: a push is validated completely, with every lock it needs
// held, before any variable changes.
//
// Thread-safe: requests arrive concurrently from transport threads. Lock
// order: mu_, then variables' locks (in name order); a responder is never
// called with a lock held.
#pragma once

#include <atomic>
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
#include "ps/consistency/consistency_policy.h"
#include "ps/embedding/sparse_tables.h"
#include "ps/shard/membership.h"
#include "ps/shard/parked_pulls.h"
#include "ps/shard/variable_store.h"
#include "ps/variable/shard_variable.h"

namespace pstrain {

struct PsShardOptions {
  int shard_index = 0;
  int num_workers = 1;
  std::string consistency = "sync";  // a registered ConsistencyPolicy
  int replicas_to_aggregate = 0;     // sync: 0 means every worker
  int staleness = 0;                 // ssp only
  OptimizerConfig optimizer;
  TimeoutConfig timeouts;
  // elastic.min_workers below num_workers: workers start absent and join
  // when they appear (WorkerRoster).
  bool workers_join = false;
  // elastic.on_worker_lost continue: a lost worker leaves the run even
  // under a policy that needs every worker (sync then aggregates the rest).
  bool continue_without_lost = false;
  // Embedding tables (ps/embedding/sparse_tables.h): this shard's part of
  // each, keyed by the hash of the row key over `num_shards`; rows start
  // from `seed` (train.init_seed). With tables, shard_index < num_shards.
  std::vector<EmbeddingTableConfig> tables;
  int num_shards = 1;
  uint64_t seed = 0;
};

class PsShard {
 public:
  // InvalidArgument for no workers; NotFound for an unknown consistency or
  // optimizer (listing the known ones).
  static absl::StatusOr<std::unique_ptr<PsShard>> Create(const PsShardOptions& options);
  ~PsShard();

  absl::Status Init(const InitRequest& request, IncomingFrame& payload, InitResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Answers through `respond` now, or later once every requested variable has
  // reached request.min_version and the policy lets it proceed (or the
  // request's timeout expires).
  void Pull(const PullRequest& request, Responder respond) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Push(const PushRequest& request, IncomingFrame& payload, PushResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Notes the worker alive (and finished, paused, resumed); from the chief,
  // a newer layout (ChiefLayout) is kept. `response` carries the chief's
  // latest layout. A malformed layout is INVALID_ARGUMENT, nothing noted.
  absl::Status Heartbeat(const HeartbeatRequest& request, HeartbeatResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes this shard's variables, optimizer slots and versions to
  // request.path (ps/shard/shard_checkpoint.h). FAILED_PRECONDITION before Init.
  absl::StatusOr<CheckpointResponse> Checkpoint(const CheckpointRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Done(const DoneRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // data.sharding dynamic (ps/shard/data_ledger.h): the worker's finished chunks
  // and its next one. FAILED_PRECONDITION on a shard without a ledger (none
  // but shard 0 has one, after the chief's Init).
  absl::StatusOr<ChunkResponse> Chunk(const ChunkRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Embedding tables (ps/shard/sparse.cc; the rules are SparseTables'):
  // FAILED_PRECONDITION before the chief's Init, which creates the tables.
  void SparsePull(const SparsePullRequest& request, IncomingFrame& payload, Responder respond) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<SparsePushResponse> SparsePush(const SparsePushRequest& request, IncomingFrame& payload)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `with_ledger_state`: also the ledger's completed chunks (a list as long
  // as the run's chunks: for the chief's checkpoints, not the shard's own
  // periodic metrics).
  StatsResponse Stats(const StatsRequest& request = StatsRequest(), bool with_ledger_state = false) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Periodic duty (the runner calls it every ~50 ms): answers expired pulls,
  // and returns an error naming the culprit when a step has waited too long
  // (sync) or a worker is lost under a policy that needs every worker. A lost
  // worker under other policies is logged and stops being waited for.
  absl::Status Check(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers every parked pull with `status` (before the shard stops serving,
  // so no caller is left waiting).
  void CancelPendingPulls(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // True when every worker has said Done or is lost.
  bool Finished() const ABSL_LOCKS_EXCLUDED(mu_);
  // The fewest updates any of its variables has had (sync: the global steps
  // applied); 0 before Init.
  int64_t MinVersion() const;
  std::vector<int> LostWorkers() const ABSL_LOCKS_EXCLUDED(mu_);
  // elastic.on_worker_lost continue: lost workers are part of the run.
  bool continues_without_lost() const { return options_.continue_without_lost; }

 private:
  PsShard(const PsShardOptions& options, std::unique_ptr<ConsistencyPolicy> policy, WorkerRoster roster);
  absl::Status ValidateWorker(int worker, const char* what) const;

  // Workers (shard.cc).
  // A worker left (done or finished pushing): let the policy apply what no
  // longer waits for it, then wake pulls.
  void OnDeparted(int worker) ABSL_LOCKS_EXCLUDED(mu_);
  // Check's steps. An error naming the culprits when a step has waited too
  // long.
  absl::Status CheckStalledSteps(absl::Time now) const;
  // Workers silent past their limit: an error naming every one under a
  // policy that needs every worker; under the others they are lost (logged,
  // no longer waited for).
  absl::Status CheckLostWorkers(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  // Init and generations (ps/shard/init.cc).
  absl::Status InstallVariables(const InitRequest& request, IncomingFrame& payload, InitResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The variables an Init describes, with their values (from the payload,
  // or from the checkpoint it names), not yet published.
  // `tables` (the shard's, or null) take the checkpoint's rows.
  absl::StatusOr<VariableMap> BuildVariables(const InitRequest& request, IncomingFrame& payload, int num_slots,
                                             SparseTables* tables) const;
  // The first Init: builds the variables and their updater and publishes
  // them as `generation`.
  absl::Status PublishVariables(const InitRequest& request, IncomingFrame& payload, int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Init of a newer generation on an initialised shard: every variable's
  // value, slots, version and consistency state are replaced at once (the
  // set of variables and their shapes must be the same); parked pulls of the
  // old generation are answered ABORTED by the next WakePulls.
  absl::Status RestoreInPlace(const InitRequest& request, IncomingFrame& payload, int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pulls report `step` as the step the run resumed from, and every
  // worker's progress starts there.
  void ResumeAt(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Pulls (ps/shard/pull.cc).
  // Fills `response` when the pull can be answered now; an error when the
  // request is bad.
  absl::StatusOr<PullState> TryServePull(const PullRequest& request, OutgoingFrame* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The answer to a pull of `vars` (each value in `dtype`), where the run
  // and, for a joining worker, the worker stand.
  void WritePullResponse(const PullRequest& request, const std::vector<ShardVariable*>& vars, WireDType dtype,
                         OutgoingFrame* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the parked pulls that can be answered now.
  void WakePulls() ABSL_LOCKS_EXCLUDED(mu_);
  // Answers the parked pulls whose deadline has come, saying what they
  // waited for.
  void ExpirePulls(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  std::string DescribeWait(const PullRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Embedding tables (ps/shard/sparse.cc).
  // The tables, or FAILED_PRECONDITION naming `what` before the first Init.
  absl::StatusOr<SparseTables*> Tables(const char* what) const ABSL_LOCKS_EXCLUDED(mu_);

  // Pushes (ps/shard/push.cc).
  // Records the pushing worker's incarnation and pace (the stragglers);
  // returns the step below which its gradients repeat its previous
  // process's.
  int64_t NotePusher(const PushRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Push's checks that need the variables' locks (held by the caller). Per
  // variable: true when the gradient repeats one the worker's previous
  // process pushed for the same step (steps below `repeats_below`), to be
  // dropped rather than refused.
  absl::StatusOr<std::vector<bool>> CheckPushAgainstState(const std::vector<ShardVariable*>& vars, int worker,
                                                          int64_t step, int64_t repeats_below) const;
  // Hands each gradient (from `decoded`, or from `payload` when the push
  // was not compressed) to the policy, the variables' locks held by the
  // caller, and counts the outcomes into `response`. True when any variable
  // took an update.
  absl::StatusOr<bool> ApplyGradients(const PushRequest& request, const std::vector<ShardVariable*>& vars,
                                      const std::vector<bool>& repeated, std::vector<IncomingFrame>& decoded,
                                      IncomingFrame& payload, PushResponse* response);
  // One gradient's outcome: a repeated one is consumed and dropped.
  absl::StatusOr<PushOutcome> ApplyGradient(ShardVariable& var, const PushRequest& request, bool repeated,
                                            IncomingFrame& gradient) ABSL_EXCLUSIVE_LOCKS_REQUIRED(var.mu);
  // The worker's progress after a push it completed.
  void NotePushed(const PushRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  const PsShardOptions options_;
  const std::unique_ptr<ConsistencyPolicy> policy_;

  // The variables, their updater and generation: set once by Init, then
  // immutable (readable without locks once initialized); replaced in place,
  // with every variable's lock held, by an Init of a newer generation.
  VariableStore store_;
  // The checkpoint step Init restored (0: a fresh start); pulls report it.
  int64_t resumed_step_ ABSL_GUARDED_BY(mu_) = 0;
  // The chief's latest transfer layout (its heartbeats'), for every worker.
  ChiefLayout chief_layout_ ABSL_GUARDED_BY(mu_);

  // Acquired before any variable's lock.
  mutable absl::Mutex mu_;
  ParkedPulls parked_ ABSL_GUARDED_BY(mu_);
  // The workers (liveness, progress, incarnations, reports, departures:
  // the roster's departed flags, atomics, are what the policy reads through
  // ConsistencyOptions::departed, under any lock), membership changes and
  // the data ledger (data.sharding dynamic, shard 0: set by the chief's Init).
  ShardMembership members_ ABSL_GUARDED_BY(mu_);
  // The embedding tables: created by the first Init, then kept (a restore
  // leaves them as they are); SparseTables locks itself.
  std::unique_ptr<SparseTables> sparse_ ABSL_GUARDED_BY(mu_);

  // Load counters.
  std::atomic<int64_t> bytes_in_{0};
  std::atomic<int64_t> bytes_out_{0};
  std::atomic<int64_t> applied_updates_{0};
  std::atomic<int64_t> dropped_gradients_{0};
  std::atomic<int64_t> apply_nanos_{0};
};

// The embedding tables' options of `options`'s shard for a run of
// `total_steps` global steps.
SparseTablesOptions SparseOptionsOf(const PsShardOptions& options, int64_t total_steps);

}  // namespace pstrain
