// Strategy: how one worker keeps its variables in step with everyone else's
// (tf_cnn_benchmarks' variable_update). One file per strategy in
// worker/strategies/, registered by name with a StrategyEntry that says what
// the strategy reads from the config and needs from the worker; nothing
// outside worker/strategies/ spells a strategy's name.
//
// The trainer drives every strategy the same way:
//   Start()                       once; the chief's replica 0 holds the initial
//                                 values; says the first step
//   for each step t:
//     BeforeStep(t)               make the replicas' variables current (e.g. pull)
//     every replica: forward/backward on its slice of the global batch
//     AfterStep(t)                synchronise gradients and update variables
//   Finish(report)                exchange reports; leave the final parameters
//                                 in replica 0 (the chief evaluates them)
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config_checks.h"
#include "common/metrics/result_json.h"
#include "common/registry.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "worker/replica_set.h"
#include "worker/timeline.h"

namespace pstrain {

struct StrategyContext {
  const ExperimentConfig* config = nullptr;
  int worker_index = 0;
  int num_workers = 1;
  int64_t total_steps = 0;
  Transport* transport = nullptr;
  ReplicaSet* replicas = nullptr;
  // Where this worker serves (the chief's rendezvous store); empty:
  // cluster.listen_address and the port of its cluster.worker_hosts entry.
  std::string listen_address;
  // The worker's timeline (config `timeline`), or null: strategies record
  // their communication phases on it.
  Timeline* timeline = nullptr;
  // data.sharding dynamic: the ledger the chief sets up on PS shard 0 (its
  // restored state comes from the checkpoint); null with static sharding.
  const LedgerSpec* ledger = nullptr;
  // Parameter servers: called by the chief in Finish once every worker has
  // reported and the final values are pulled, before the shards hear it is
  // done and exit (null: nothing). What still needs the shards then runs
  // here: evaluating a sparse model, whose tables live on them.
  std::function<void()> before_chief_done;
};

// What the chief learns at the end: every worker's report (its own first) and
// the parameter servers' load, when there are parameter servers.
struct ClusterReport {
  std::vector<WorkerReport> workers;
  std::vector<ShardLoad> ps_load;
  std::vector<int> lost_workers;
  // Who joined and left (PS shard 0's record), and data.sharding dynamic's
  // ledger counts.
  std::vector<MembershipChange> membership;
  std::optional<LedgerReport> ledger;
  // Workers named slower than their peers during the run (PS shard 0's record).
  std::vector<Straggler> stragglers;
};

// What a strategy has done so far, for the worker's report, its summary and
// its metrics.
struct StrategyTraffic {
  // Payload bytes as they travelled: pushed to and pulled from parameter
  // servers, handed to the collective (each all-reduce of B bytes counts B).
  int64_t bytes_pushed = 0;
  int64_t bytes_pulled = 0;
  int64_t bytes_allreduced = 0;
  // Time spent waiting for others (pulls, all-reduces).
  absl::Duration wait;
  // Gradients the parameter servers dropped as stale (sync with backup workers).
  int64_t dropped_gradients = 0;
  // An elastic group (Strategy::group()): its generation and members now;
  // -1 and 0 without one.
  int64_t group_generation = -1;
  int group_members = 0;
};

// What only a strategy whose state lives on parameter-server shards does
// (the PS strategies; embedding tables beside an all-reduce): the training
// loop asks Strategy::shards() for it, null for every other strategy.
class ShardSession {
 public:
  virtual ~ShardSession() = default;
  // The generation of the shards' state the worker works on: the sparse
  // stage's requests carry it.
  virtual int64_t generation() const = 0;
  // BeforeStep or AfterStep failed with `failure`: recovers if it can (waits
  // for a restarted shard and the chief's restore) and returns the step to
  // continue from, whose values are then in place (the next BeforeStep pulls
  // nothing); else `failure`.
  virtual absl::StatusOr<int64_t> Recover(const absl::Status& failure) = 0;
  // Chief: the recoveries of the run so far, in order.
  virtual std::vector<Recovery> recoveries() const = 0;
  // data.sharding dynamic: reports this worker's finished chunks and asks
  // for its next one (the ledger lives on PS shard 0).
  virtual absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>& completed) = 0;
  // data.sharding dynamic, the ledger has no chunk for this worker while
  // others still hold some. PauseSteps: until ResumeSteps, this worker's
  // steps do not count (sync steps do not wait for it, ssp pulls are not held
  // back by it); its last step's gradients are in first. ResumeSteps (a
  // chunk came back): its steps count again; returns the step to train at
  // (sync: the step being aggregated, whose values are then in place;
  // otherwise `next_step`).
  virtual absl::Status PauseSteps() = 0;
  virtual absl::StatusOr<int64_t> ResumeSteps(int64_t next_step) = 0;
  // Whether the shards compare the workers' pace: the dense variables are
  // on them, so each step's pushes report its busy time. False for tables
  // beside another strategy: nothing is said of stragglers then.
  virtual bool watches_stragglers() const = 0;
  // The workers shard 0 names slower than their peers now (from the busy
  // time each step's pushes report; ps/shard/straggler_watch.h).
  virtual std::vector<Straggler> stragglers() const = 0;
  // The pipeline's layout tuner, if it runs (ps_scheduling.tune): its
  // decisions so far. Empty otherwise.
  virtual LayoutTuning layout_tuning() const { return {}; }
};

// What a strategy whose group of workers re-forms without parameter servers
// does (the elastic all-reduce, worker/strategies/elastic_allreduce.cc): the
// training loop asks Strategy::group() for it, null for every other
// strategy.
class GroupSession {
 public:
  virtual ~GroupSession() = default;
  // BeforeStep or AfterStep failed with `failure` (a peer died or stalled):
  // the survivors re-form the group and take one member's state; returns
  // the step to continue from, whose values are then in place. `failure`
  // when the run cannot go on (elastic.on_worker_lost stop, too few left).
  virtual absl::StatusOr<int64_t> Recover(const absl::Status& failure) = 0;
  // data.sharding dynamic: this worker's batch of the group's next step
  // (the ledger every member keeps, worker/elastic/group_ledger.h); `end`
  // once the run's data is done for it. What it completed counts when the
  // step's all-reduce does, so `completed` is not needed.
  virtual absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>& completed) = 0;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Returns the first step this worker trains: 0, or the step of the
  // checkpoint (or the running run) it joined.
  virtual absl::StatusOr<int64_t> Start() = 0;
  virtual absl::Status BeforeStep(int64_t step) = 0;
  virtual absl::Status AfterStep(int64_t step) = 0;
  // Non-chief workers return only their own report.
  virtual absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) = 0;
  // A line for the progress banner, e.g. "parameter_server (sync, 2 PS, grpc)".
  virtual std::string Describe() const = 0;
  // Called by replica `replica`'s backward as each variable's gradient
  // becomes final, so communication can overlap the rest of backward. Null:
  // the strategy does all its work in AfterStep.
  virtual GradientReadyHook HookFor(int replica) { return nullptr; }
  // Its traffic and waiting so far.
  virtual StrategyTraffic traffic() const { return {}; }
  // Its parameter-server shards' session; null without one.
  virtual ShardSession* shards() { return nullptr; }
  // Its re-forming group's session; null without one.
  virtual GroupSession* group() { return nullptr; }
};

using StrategyFactory = std::function<absl::StatusOr<std::unique_ptr<Strategy>>(const StrategyContext&)>;

// What a strategy needs from the worker that runs it, for one config.
struct StrategyNeeds {
  // Variables live on parameter servers: cluster.ps_hosts must list some.
  bool parameter_servers = false;
  // The most workers it can synchronise (0: any); 1 for strategies that
  // synchronise the devices of one worker only.
  int max_workers = 0;
  // The `device` values it runs on; empty: every registered device
  // (device/device_registry.h), so a new device kind needs no strategy edit.
  std::vector<std::string> devices;
  // GPU replicas keep pinned host mirrors of the variables (ReplicaSet);
  // false for strategies that work on the device variables (NCCL).
  bool host_mirrors = true;
  // With host mirrors: every gradient is downloaded as backward finalises it.
  // False when the strategy reduces on the devices first and downloads the
  // result itself (local_parameter_device gpu).
  bool download_gradients = true;
  // Without host mirrors: with loss scaling (optim/loss_scaler.h) the
  // strategy unscales the gradients on the devices and reports overflows
  // (ReplicaSet::MarkGradientsNotFinite): the NCCL strategies.
  bool unscales_on_device = false;
  // The collective library it synchronises through (worker/collective/
  // collective.h: "gloo", "mpi", "nccl"), or "" (none, or parameter servers).
  std::string collective;
  // The workers must be the ranks of one mpirun (pstrain-launch starts it).
  bool launched_by_mpirun = false;
  // Without parameter servers: its group re-forms when workers come and go
  // (Strategy::group()), so data.sharding dynamic and the elastic fields
  // are its to check.
  bool elastic_group = false;
};

// A strategy's registry entry: everything the rest of the system asks of a
// variable_update, so adding one is one file in worker/strategies/.
struct StrategyEntry {
  // One line for documentation and messages.
  std::string summary;
  // The all_reduce_spec values it reads (its default first is "" when the
  // field may be left empty); none: the field must stay empty.
  std::vector<std::string> all_reduce_specs;
  // It places variables on GPUs with local_parameter_device gpu (others
  // must leave it cpu).
  bool local_parameter_device_gpu = false;
  // It reads `collective`, `hierarchical_allreduce` and `workers_per_host`
  // (others must leave them unset).
  bool reads_collective = false;
  // The `compression` values it supports besides "none" (none: nothing of
  // it travels between workers, so only "none").
  std::vector<std::string> compressions;
  // What the worker must provide for `config` (one `check` accepted).
  std::function<StrategyNeeds(const ExperimentConfig& config)> needs;
  // Its own config rules beyond the above (null: none).
  ConfigCheck check;
  StrategyFactory create;
  // Without parameter servers of its own, it may run a model with embedding
  // tables: the tables on the cluster.ps_hosts shards, the dense variables
  // its way (worker/tables_beside.cc). Others refuse model.tables.
  bool tables_beside = false;
};

// Strategies by variable_update. Registering also makes config validation
// check the strategy's fields and needs (worker/strategy.cc).
Registry<StrategyEntry>& StrategyRegistry();

// The needs of config.variable_update() for `config`, after checking the
// config against the strategy (as config validation does): InvalidArgument
// naming the field, NotFound for an unknown strategy.
absl::StatusOr<StrategyNeeds> NeedsOf(const ExperimentConfig& config, absl::string_view source = "config");

// Something every strategy may be wrapped in, registered where it is made
// (worker/tables_beside.cc: embedding tables on PS shards beside a strategy
// without parameter servers): given the created strategy and its entry, it
// returns the strategy to run (the same one when it does not apply).
using StrategyWrapper = std::function<absl::StatusOr<std::unique_ptr<Strategy>>(
    const StrategyContext& context, const StrategyEntry& entry, std::unique_ptr<Strategy> strategy)>;
// Registers `wrap` under `name` (wrappers apply in name order); true, for a
// static initialiser.
bool RegisterStrategyWrapper(const std::string& name, StrategyWrapper wrap);

// Creates context.config->variable_update()'s strategy (the config is
// checked as NeedsOf does first), then lets every registered wrapper wrap it.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context);

}  // namespace pstrain
