// Runs a whole PS cluster as threads of the test process over the in-process
// transport: every PS shard and every worker, exactly the code the binaries
// run. Shared by the worker tests.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/metrics/result_json.h"
#include "proto/config.pb.h"

namespace pstrain {

struct ClusterRun {
  RunResult chief;                               // worker 0's result
  std::vector<std::vector<float>> final_params;  // chief's final pull, model order
  std::vector<absl::Status> ps_status;           // per shard
  std::vector<absl::Status> worker_status;       // per worker
};

// Fills cluster.ps_hosts/worker_hosts with in-process addresses for
// `num_ps` shards and `num_workers` workers.
void SetInProcessHosts(ExperimentConfig* config, int num_ps, int num_workers);

// Runs every role to completion; returns the chief's result, or the first error.
absl::StatusOr<ClusterRun> RunInProcessCluster(const ExperimentConfig& config);

// The same cluster (every role a thread of this process) over a real
// transport by name ("grpc", "ucx"): the config's hosts are replaced by free
// 127.0.0.1 ports, one transport object carries every role's traffic, and
// config.transport is set to `transport`.
absl::StatusOr<ClusterRun> RunClusterOverTransport(ExperimentConfig config, const std::string& transport);

}  // namespace pstrain
