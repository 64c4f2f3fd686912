// pstrain-worker: one training worker; worker 0 is the chief.
//   pstrain-worker --config=exp.yaml --index=0 [--ps_hosts=... --worker_hosts=... --run_dir=DIR]
// Exits 0 when training finished (the chief has written result.json into
// --run_dir, default runs/<experiment>-<time>/), 1 on a runtime failure, 2 on
// a bad config.
#include <iostream>

#include "common/role/role_main.h"
#include "common/transport/transport.h"
#include "device/device_registry.h"
#include "worker/run/trainer.h"
#include "worker/strategy.h"

int main(int argc, char** argv) {
  using namespace pstrain;
  RoleSetup setup = InitRole(&argc, &argv, RoleKind::kWorker,
                             [](const ExperimentConfig& config) { return CheckDevicePresent(config.device()); });
  if (setup.check_only) {
    absl::StatusOr<StrategyNeeds> needs = NeedsOf(setup.config);
    if (needs.ok() && needs->launched_by_mpirun) std::cout << "needs: mpirun" << std::endl;
    return 0;
  }
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
  WorkerRunOptions options;
  options.run_dir = setup.run_dir;
  options.byte_scale = setup.byte_scale;
  options.metrics = &metrics;
  absl::StatusOr<RunResult> result = RunWorker(setup.config, setup.role.index, transport->get(), options);
  if (!result.ok()) {
    std::cerr << "pstrain-worker " << setup.role.index << ": " << result.status().message() << std::endl;
    return kExitFailure;
  }
  return 0;
}
