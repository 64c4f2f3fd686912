// Strategy: how one worker keeps its variables in step with everyone else's
// (tf_cnn_benchmarks' variable_update). One file per strategy in
// worker/strategies/, registered by name.
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
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/result_json.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "worker/replica_set.h"

namespace pstrain {

struct StrategyContext {
  const ExperimentConfig* config = nullptr;
  int worker_index = 0;
  int num_workers = 1;
  int64_t total_steps = 0;
  Transport* transport = nullptr;
  ReplicaSet* replicas = nullptr;
  // Where this worker serves (the chief's rendezvous store); empty: 0.0.0.0
  // and the port of its cluster.worker_hosts entry.
  std::string listen_address;
};

// What the chief learns at the end: every worker's report (its own first) and
// the parameter servers' load, when there are parameter servers.
struct ClusterReport {
  std::vector<WorkerReport> workers;
  std::vector<ShardLoadSummary> ps_load;
  std::vector<int> lost_workers;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual absl::Status Start() = 0;
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
  // Gradients dropped by the PS as stale so far (sync with backup workers).
  virtual int64_t dropped_gradients() const { return 0; }
  // Time spent waiting for others so far (pulls, all-reduces).
  virtual absl::Duration wait_time() const { return absl::ZeroDuration(); }
};

using StrategyFactory = std::function<absl::StatusOr<std::unique_ptr<Strategy>>(const StrategyContext&)>;
bool RegisterStrategy(const std::string& name, StrategyFactory factory);
// Unknown names are NotFound listing the known ones.
absl::StatusOr<std::unique_ptr<Strategy>> CreateStrategy(const std::string& name, const StrategyContext& context);

}  // namespace pstrain
