// Shared pieces of the integration tests: configs written to temp dirs,
// free loopback ports, finding role processes by their command line.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pstrain::test {

// Sync, 1 PS + 2 workers, synthetic data, effectively endless: a run that
// only ends by the failure (or the kill) a test brings about.
inline constexpr char kEndlessSyncConfig[] = R"(
cluster: {ps_hosts: ["localhost:1"], worker_hosts: ["localhost:2", "localhost:3"]}
model: {name: mlp, hidden_units: [16], input_shape: [1, 8, 8], num_classes: 4}
data: {source: synthetic, synthetic_examples: 512}
optimizer: {name: sgd, learning_rate: 0.01}
train: {batch_size_per_device: 8, steps: 100000000, display_every: 20, evaluate: false}
consistency: sync
timeouts: {heartbeat_seconds: 0.5, worker_lost_seconds: 5, sync_step_seconds: 60}
)";

// "127.0.0.1:p1,127.0.0.1:p2,..." for n free loopback ports.
std::string FreeLoopbackHosts(int n);

// The n-th entry of a comma-separated host list.
std::string NthHost(const std::string& hosts, int n);

// Pids of live processes whose command line contains every one of `needles`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles);

// Path of a file in the source tree (e.g. "configs/x.yaml").
std::string SourcePath(const std::string& relative);

// `yaml` with each top-level "key: value" line of `overrides` replacing the
// line of that key, or appended when the file has none.
std::string WithOverrides(const std::string& yaml, const std::string& overrides);

}  // namespace pstrain::test
