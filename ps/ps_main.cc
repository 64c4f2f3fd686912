// pstrain-ps: one parameter-server shard.
//   pstrain-ps --config=exp.yaml --index=0 [--ps_hosts=... --worker_hosts=...]
// Exits 0 once every worker is done, 1 when a worker is lost in sync mode (the
// message names it) or the shard fails, 2 on a bad config.
#include <iostream>

#include "common/role/role_main.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"

int main(int argc, char** argv) {
  using namespace pstrain;
  RoleSetup setup = InitRole(&argc, &argv, RoleKind::kPs);
  if (setup.check_only) return 0;
  absl::StatusOr<std::unique_ptr<Transport>> transport = CreateRoleTransport(setup);
  if (!transport.ok()) {
    std::cerr << "error: " << transport.status().message() << std::endl;
    return kExitBadConfig;
  }
  MetricRegistry metrics;
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> endpoint = StartMetricsEndpoint(setup, &metrics);
  if (!endpoint.ok()) {
    std::cerr << "error: " << endpoint.status().message() << std::endl;
    return kExitBadConfig;
  }
  PsRunOptions options;
  options.metrics = &metrics;
  absl::Status status = RunParameterServer(setup.config, setup.role.index, transport->get(), options);
  if (!status.ok()) {
    std::cerr << "pstrain-ps " << setup.role.index << ": " << status.message() << std::endl;
    return kExitFailure;
  }
  LOG(INFO) << "PS shard " << setup.role.index << ": every worker is done; exiting";
  return 0;
}
