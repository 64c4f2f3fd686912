// TableSession: a worker's part in the life of PS shards that hold only the
// run's embedding tables (model.tables) while its dense variables follow a
// strategy without parameter servers (variable_update allreduce): the
// hybrid TorchRec, PERSIA and BytePS users run (docs/EMBEDDINGS.md, "Dense
// MLPs on all-reduce beside tables on the PS").
//
//   Start   the chief's Init of every shard (it creates the tables; no dense
//           variables) at a new generation; every worker's Join, which
//           waits for that Init and adopts its generation; then a heartbeat
//           every timeouts.heartbeat_seconds, so the shards can tell a live
//           worker from a lost one between its sparse requests.
//   Finish  a heartbeat saying this worker pushes no more; the chief then
//           runs `before_done` (the final evaluation, which reads the
//           tables) and takes the shards' load for the report; every worker
//           sends its Done, and the shards exit once all have.
//
// Not thread-safe apart from set_step (the training thread calls the rest).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/periodic_thread.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "worker/ps_client.h"
#include "worker/strategy.h"

namespace pstrain {

class TableSession {
 public:
  // Connects to every shard of config.cluster().ps_hosts.
  static absl::StatusOr<std::unique_ptr<TableSession>> Create(const ExperimentConfig& config, int worker_index,
                                                              Transport* transport);
  ~TableSession();

  // Waits up to timeouts.startup_seconds for the shards (and, on other
  // workers, for the chief's Init).
  absl::Status Start(int64_t total_steps);
  // The step the heartbeats report (the last one this worker finished).
  void set_step(int64_t step) { step_.store(step); }
  // The generation of the shards' state (after Start).
  int64_t generation() const { return client_->generation(); }
  int num_shards() const { return client_->num_shards(); }

  // The end of this worker's run (above); the chief adds the shards' load
  // to `report`.
  absl::Status Finish(const WorkerReport& mine, const std::function<void()>& before_done, ClusterReport* report);

 private:
  TableSession(const ExperimentConfig& config, int worker_index) : config_(config), worker_(worker_index) {}

  const ExperimentConfig config_;
  const int worker_;
  std::vector<Variable> no_variables_;  // the client's (empty) dense variables
  std::unique_ptr<PsClient> client_;
  std::atomic<int64_t> step_{0};
  std::atomic<bool> finished_pushing_{false};
  std::unique_ptr<PeriodicThread> heartbeats_;  // from Start on
};

}  // namespace pstrain
