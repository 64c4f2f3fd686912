// Where the roles of a launched cluster listen: each on its own free port of
// 127.0.0.1, or, when the config has `emulation`, each on its emulated host
// (emulated_cluster.h). The roles get these as --ps_hosts and --worker_hosts
// in place of the config's own lists, which give only the counts.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/config.pb.h"
#include "tools/launch/emulated_cluster.h"

namespace pstrain::launch {

struct ClusterAddresses {
  std::string ps_hosts;      // "addr:port,..." for --ps_hosts
  std::string worker_hosts;  // "addr:port,..." for --worker_hosts
  // With `emulation`: the hosts the roles run on (removed when this goes);
  // null otherwise.
  std::unique_ptr<EmulatedCluster> emulated;
};

// One address per role of `experiment`'s cluster. With `emulation` the hosts
// are made and their links capped at link_gbps / LinkDilation (a dilated
// run slows the links as it slows the devices, and a byte-scaled one as
// much more as it moves fewer bytes: common/config/byte_scale.h), on a /24 of
// 10.0.0.0/8 picked from this process's id so concurrent launches do not
// collide. Errors end with "; nothing was started" when emulating and name
// `config_path`: InvalidArgument when this machine cannot emulate (not root,
// no `ip`, no `tc`), Internal for any other failure, and PickFreeLoopbackPorts'
// errors without emulation.
absl::StatusOr<ClusterAddresses> AssignAddresses(const ExperimentConfig& experiment, const std::string& config_path,
                                                 double byte_scale = 1);

}  // namespace pstrain::launch
