// Strategy: how one worker keeps its variables in step with everyone else's
// (tf_cnn_benchmarks' variable_update). One file per strategy in
// worker/strategies/, registered by name with a StrategyEntry that says what
// the strategy reads from the config and needs from the worker; nothing
// outside worker/strategies/ spells a strategy's name.
//
// The trainer drives every strategy the same way:
//   Start()                       once; the chief's replica 0 holds the initial values
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
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual absl::Status Start() = 0;
  // The first step this worker trains (after Start): 0, or the step of the
  // checkpoint the run resumed from.
  virtual int64_t start_step() const { return 0; }
  virtual absl::Status BeforeStep(int64_t step) = 0;
  virtual absl::Status AfterStep(int64_t step) = 0;
  // BeforeStep or AfterStep failed with `failure`: recovers if the strategy
  // can (parameter servers: waits for a restarted shard and the chief's
  // restore) and returns the step to continue from, whose values are then
  // in place (the next BeforeStep pulls nothing). Default: `failure`.
  virtual absl::StatusOr<int64_t> Recover(const absl::Status& failure) { return failure; }
  // The generation of the PS shards' state the worker now works on (0:
  // none, or not a PS strategy): the sparse stage's requests carry it.
  virtual int64_t shard_generation() const { return 0; }
  // Chief: the recoveries of the run so far, in order.
  virtual std::vector<Recovery> recoveries() const { return {}; }
  // data.sharding dynamic: reports this worker's finished chunks and asks
  // for its next one (the ledger lives on PS shard 0). Default:
  // FAILED_PRECONDITION (the strategy has no parameter servers).
  virtual absl::StatusOr<ChunkResponse> ExchangeChunks(const std::vector<CompletedChunk>& completed) {
    return absl::FailedPreconditionError("data.sharding dynamic needs a parameter-server strategy");
  }
  // Non-chief workers return only their own report.
  virtual absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) = 0;
  // A line for the progress banner, e.g. "parameter_server (sync, 2 PS, grpc)".
  virtual std::string Describe() const = 0;
  // Called by replica `replica`'s backward as each variable's gradient
  // becomes final, so communication can overlap the rest of backward. Null:
  // the strategy does all its work in AfterStep.
  virtual GradientReadyHook HookFor(int replica) { return nullptr; }
  // Gradients dropped by the PS as stale so far (sync with backup workers).
  virtual int64_t dropped_gradients() const { return 0; }
  // Time spent waiting for others so far (pulls, all-reduces).
  virtual absl::Duration wait_time() const { return absl::ZeroDuration(); }
  // Adds the bytes this worker has moved so far (bytes_pushed, bytes_pulled,
  // bytes_allreduced) to `report`.
  virtual void FillTraffic(WorkerReport* report) const {}
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
  // its way (worker/tables_beside.h). Others refuse model.tables.
  bool tables_beside = false;
};

// Strategies by variable_update. Registering also makes config validation
// check the strategy's fields and needs (worker/strategy.cc).
Registry<StrategyEntry>& StrategyRegistry();

// The needs of config.variable_update() for `config`, after checking the
// config against the strategy (as config validation does): InvalidArgument
// naming the field, NotFound for an unknown strategy.
absl::StatusOr<StrategyNeeds> NeedsOf(const ExperimentConfig& config, absl::string_view source = "config");

// Creates context.config->variable_update()'s strategy (the config is
// checked as NeedsOf does first).
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const StrategyContext& context);

}  // namespace pstrain
