// RunParameterServer: serve one PS shard until every worker is done.
//
// Used by pstrain-ps and, with the in-process transport, by tests that run a
// whole cluster as threads. Returns OK when every worker said Done; an error
// naming the worker when one is lost in sync mode or a sync step times out
// (and, in async mode, when a worker was lost along the way); Cancelled when
// `cancel` becomes true.
#pragma once

#include <atomic>

#include "absl/status/status.h"
#include "common/telemetry/metric_registry.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

struct PsRunOptions {
  // Address to listen on; default: cluster.listen_address (host_port.h
  // ListenAddress) and the port of ps_hosts[index].
  std::string listen_address;
  const std::atomic<bool>* cancel = nullptr;
  // Filled with the shard's final statistics.
  StatsResponse* final_stats = nullptr;
  // When set, the shard's load is kept current here (ps/ps_metrics.h).
  MetricRegistry* metrics = nullptr;
};

absl::Status RunParameterServer(const ExperimentConfig& config, int shard_index, Transport* transport,
                                const PsRunOptions& options = {});

}  // namespace pstrain
