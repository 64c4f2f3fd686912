#include "tools/launch/cluster_addresses.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/config/byte_scale.h"
#include "tools/launch/free_ports.h"

namespace pstrain::launch {
namespace {

// "127.0.0.1:<port>,..." for ports[begin, begin + count).
std::string HostList(const std::vector<int>& ports, size_t begin, size_t count) {
  std::vector<std::string> hosts;
  for (size_t i = begin; i < begin + count; ++i) hosts.push_back(absl::StrCat("127.0.0.1:", ports[i]));
  return absl::StrJoin(hosts, ",");
}

// The config's `emulation` as EmulatedCluster lays it out.
EmulatedLayout LayoutOf(const ExperimentConfig& experiment, double byte_scale) {
  const EmulationConfig& e = experiment.emulation();
  EmulatedLayout layout;
  layout.num_ps = experiment.cluster().ps_hosts_size();
  layout.num_workers = experiment.cluster().worker_hosts_size();
  layout.workers_per_host = std::max(1, e.workers_per_host());
  layout.server_hosts = e.ps_placement() == EmulationConfig::colocated ? e.server_hosts() : layout.num_ps;
  // Links as much slower than modelled as time, and as bytes are fewer.
  layout.link_gbps = e.link_gbps() / LinkDilation(experiment, byte_scale);
  layout.server_link_gbps =
      (e.has_server_link_gbps() ? e.server_link_gbps() : e.link_gbps()) / LinkDilation(experiment, byte_scale);
  layout.port = experiment.cluster().port();
  return layout;
}

absl::StatusOr<ClusterAddresses> EmulatedAddresses(const ExperimentConfig& experiment, const std::string& config_path,
                                                   double byte_scale) {
  const int subnet = (216 + getpid() % 32) * 256 + (getpid() / 32) % 256;
  absl::StatusOr<std::unique_ptr<EmulatedCluster>> made =
      EmulatedCluster::Create(LayoutOf(experiment, byte_scale), subnet);
  if (!made.ok()) {
    const std::string message =
        absl::StrCat(config_path, ": emulation: ", made.status().message(), "; nothing was started");
    // Create says FailedPrecondition when this machine cannot emulate.
    return made.status().code() == absl::StatusCode::kFailedPrecondition ? absl::InvalidArgumentError(message)
                                                                         : absl::InternalError(message);
  }
  ClusterAddresses addresses;
  addresses.emulated = *std::move(made);
  addresses.ps_hosts = addresses.emulated->ps_hosts();
  addresses.worker_hosts = addresses.emulated->worker_hosts();
  return addresses;
}

absl::StatusOr<ClusterAddresses> LoopbackAddresses(const ExperimentConfig& experiment) {
  const int num_ps = experiment.cluster().ps_hosts_size();
  const int num_workers = experiment.cluster().worker_hosts_size();
  absl::StatusOr<std::vector<int>> ports = PickFreeLoopbackPorts(num_ps + num_workers);
  if (!ports.ok()) return ports.status();
  ClusterAddresses addresses;
  addresses.ps_hosts = HostList(*ports, 0, num_ps);
  addresses.worker_hosts = HostList(*ports, num_ps, num_workers);
  return addresses;
}

}  // namespace

absl::StatusOr<ClusterAddresses> AssignAddresses(const ExperimentConfig& experiment, const std::string& config_path,
                                                 double byte_scale) {
  if (experiment.has_emulation()) return EmulatedAddresses(experiment, config_path, byte_scale);
  return LoopbackAddresses(experiment);
}

}  // namespace pstrain::launch
