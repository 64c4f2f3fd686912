// RunWorker: one worker's whole life in a parameter-server run.
//
//   chief (worker 0): initialise variables, Init every shard
//   every worker:     for each step: pull -> forward/backward on its shard of
//                     the global batch -> push; heartbeats in the background
//   chief:            wait for the other workers' reports, pull the final
//                     parameters, evaluate on the test set, Done, write
//                     result.json into run_dir
//   others:           Done with their report
//
// Sync mode pulls version >= (last pulled version + 1), i.e. waits for the
// update its own gradients took part in; async pulls whatever is latest.
// Used by pstrain-worker and, over the in-process transport, by tests.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/result_json.h"
#include "common/telemetry/metric_registry.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"

namespace pstrain {

struct WorkerRunOptions {
  // The chief writes result.json here (creating the directory); empty:
  // nowhere (tests).
  std::string run_dir;
  // Address this worker serves on (allreduce: the chief's rendezvous store);
  // empty: cluster.listen_address and the port of its cluster.worker_hosts entry.
  std::string listen_address;
  // Chief: receives the final parameters (model order) when non-null.
  std::vector<std::vector<float>>* final_parameters = nullptr;
  // When set, this worker's progress is kept current here (worker_metrics.h).
  MetricRegistry* metrics = nullptr;
};

// Returns the run's result (chief: complete, with test accuracy; others:
// their own throughput and loss).
absl::StatusOr<RunResult> RunWorker(const ExperimentConfig& config, int worker_index, Transport* transport,
                                    const WorkerRunOptions& options = {});

// Steps every worker runs: train.steps, or epochs over the shard-per-step
// schedule when steps is 0.
int64_t TotalSteps(const ExperimentConfig& config, int64_t train_examples);

}  // namespace pstrain
