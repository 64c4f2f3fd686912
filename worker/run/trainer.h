// RunWorker: one worker's whole run (worker/run/training_run.h has its
// stages: set up, start, step loop, finish).
//
//   chief (worker 0): initialise variables, start the strategy (parameter
//                     servers: Init every shard, or restore a checkpoint)
//   every worker:     for each step: the strategy's BeforeStep (e.g. pull)
//                     -> forward/backward on its shard of the global batch
//                     -> AfterStep (e.g. push, all-reduce)
//   chief:            wait for the other workers' reports, evaluate the final
//                     parameters on the test set, write result.json into
//                     run_dir
//   others:           hand in their report
//
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
  // When set, this worker's progress is kept current here
  // (worker/run/observers/worker_metrics.h).
  MetricRegistry* metrics = nullptr;
  // device emulated: the byte scale (common/config/byte_scale.h), checked.
  double byte_scale = 1;
};

// Returns the run's result (chief: complete, with test accuracy; others:
// their own throughput and loss).
absl::StatusOr<RunResult> RunWorker(const ExperimentConfig& config, int worker_index, Transport* transport,
                                    const WorkerRunOptions& options = {});

}  // namespace pstrain
