#include "tests/worker/in_process_cluster.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/transport/inproc/inproc_transport.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"
#include "tools/launch/free_ports.h"
#include "worker/run/trainer.h"

namespace pstrain {

void SetInProcessHosts(ExperimentConfig* config, int num_ps, int num_workers) {
  ClusterConfig* cluster = config->mutable_cluster();
  cluster->clear_ps_hosts();
  cluster->clear_worker_hosts();
  for (int i = 0; i < num_ps; ++i) cluster->add_ps_hosts(absl::StrCat("ps", i, ":1"));
  for (int i = 0; i < num_workers; ++i) cluster->add_worker_hosts(absl::StrCat("worker", i, ":1"));
}

namespace {

absl::StatusOr<ClusterRun> RunCluster(const ExperimentConfig& config, Transport& transport) {
  const int num_ps = config.cluster().ps_hosts_size();
  const int num_workers = config.cluster().worker_hosts_size();
  ClusterRun run;
  run.ps_status.resize(num_ps);
  run.worker_status.resize(num_workers);
  std::vector<std::thread> threads;
  // A worker that fails stops the shards (as a real cluster's would time
  // out), so the other roles end promptly instead of at their deadlines.
  std::atomic<bool> a_worker_failed{false};
  std::atomic<int> first_failed{-1};  // the failure reported: the cause, not its echoes
  for (int i = 0; i < num_ps; ++i) {
    threads.emplace_back([&, i] {
      PsRunOptions options;
      options.listen_address = config.cluster().ps_hosts(i);
      options.cancel = &a_worker_failed;
      run.ps_status[i] = RunParameterServer(config, i, &transport, options);
    });
  }
  for (int i = 0; i < num_workers; ++i) {
    threads.emplace_back([&, i] {
      WorkerRunOptions options;
      options.listen_address = config.cluster().worker_hosts(i);
      if (i == 0) options.final_parameters = &run.final_params;
      absl::StatusOr<RunResult> result = RunWorker(config, i, &transport, options);
      run.worker_status[i] = result.status();
      if (!result.ok()) {
        LOG(ERROR) << "worker " << i << " failed: " << result.status();
        int none = -1;
        first_failed.compare_exchange_strong(none, i);
        a_worker_failed = true;
      }
      if (i == 0 && result.ok()) run.chief = *result;
    });
  }
  for (std::thread& t : threads) t.join();
  if (const int w = first_failed.load(); w >= 0) {
    const absl::Status& s = run.worker_status[w];
    return absl::Status(s.code(), absl::StrCat("worker ", w, ": ", s.message()));
  }
  for (size_t w = 0; w < run.worker_status.size(); ++w) {
    const absl::Status& s = run.worker_status[w];
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("worker ", w, ": ", s.message()));
    }
  }
  for (size_t i = 0; i < run.ps_status.size(); ++i) {
    const absl::Status& s = run.ps_status[i];
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("PS ", i, ": ", s.message()));
  }
  return run;
}

}  // namespace

absl::StatusOr<ClusterRun> RunInProcessCluster(const ExperimentConfig& config) {
  InprocTransport transport;
  return RunCluster(config, transport);
}

absl::StatusOr<ClusterRun> RunClusterOverTransport(ExperimentConfig config, const std::string& transport) {
  ClusterConfig* cluster = config.mutable_cluster();
  const int num_ps = cluster->ps_hosts_size(), num_workers = cluster->worker_hosts_size();
  absl::StatusOr<std::vector<int>> ports = launch::PickFreeLoopbackPorts(num_ps + num_workers);
  if (!ports.ok()) return ports.status();
  cluster->clear_ps_hosts();
  cluster->clear_worker_hosts();
  for (int i = 0; i < num_ps; ++i) cluster->add_ps_hosts(absl::StrCat("127.0.0.1:", (*ports)[i]));
  for (int i = 0; i < num_workers; ++i) cluster->add_worker_hosts(absl::StrCat("127.0.0.1:", (*ports)[num_ps + i]));
  config.set_transport(transport);
  TransportOptions options;
  options.max_message_bytes = config.max_message_bytes();
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport(transport, options);
  if (!t.ok()) return t.status();
  return RunCluster(config, **t);
}

}  // namespace pstrain
