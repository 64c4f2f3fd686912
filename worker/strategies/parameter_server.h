// ParameterServerStrategy: variables live on the PS shards.
//
//   BeforeStep: pull into replica 0 (sync: the version produced by the last
//               step; ssp: wait for laggards; async: latest), copy to the other
//               replicas.
//   AfterStep:  sum the replicas' gradients in this worker (on the host for
//               "parameter_server", by all_reduce_spec for
//               "distributed_replicated"), push the worker's mean gradient once.
//   Finish:     non-chief: Done with its report. Chief: wait for the others'
//               reports, pull the final parameters, Done.
// A heartbeat thread tells every shard this worker is alive.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "worker/ps_client.h"
#include "worker/strategy.h"

namespace pstrain {

class ParameterServerStrategy : public Strategy {
 public:
  // `local_reduce_spec`: how the replicas' gradients are combined before the
  // push ("pscpu" or "none").
  static absl::StatusOr<std::unique_ptr<Strategy>> Create(const StrategyContext& context, std::string name,
                                                          std::string local_reduce_spec);
  ~ParameterServerStrategy() override;

  absl::Status Start() override;
  absl::Status BeforeStep(int64_t step) override;
  absl::Status AfterStep(int64_t step) override;
  absl::StatusOr<ClusterReport> Finish(const WorkerReport& mine) override;
  std::string Describe() const override;
  int64_t dropped_gradients() const override { return dropped_; }
  absl::Duration wait_time() const override { return pull_wait_; }

 private:
  ParameterServerStrategy(const StrategyContext& context, std::string name, std::string local_reduce_spec)
      : context_(context), name_(std::move(name)), local_reduce_spec_(std::move(local_reduce_spec)) {}
  void StopHeartbeats();

  StrategyContext context_;
  std::string name_;
  std::string local_reduce_spec_;
  std::unique_ptr<PsClient> client_;
  int64_t pulled_version_ = -1;
  int64_t dropped_ = 0;
  absl::Duration pull_wait_;
  std::atomic<int64_t> current_step_{0};
  absl::Notification stop_heartbeats_;
  std::thread heartbeats_;
};

}  // namespace pstrain
