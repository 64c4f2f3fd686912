// An emulated cluster for pstrain-launch (config `emulation`,
// docs/EMULATION.md): every PS shard and worker placed on an emulated host
// (EmulatedHosts: a network namespace with its own address on a bridge),
// each host's link capped, and the host lists the roles get.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::launch {

struct EmulatedLayout {
  int num_ps = 0;
  int num_workers = 0;
  int workers_per_host = 1;  // worker w on worker host w / workers_per_host
  // The last `server_hosts` shards run one per host of their own (hosts that
  // run only shards); shard i < num_ps - server_hosts on worker host i mod
  // worker hosts.
  int server_hosts = 0;
  double link_gbps = 0;         // each worker host, each direction, as tc applies it; 0: uncapped
  double server_link_gbps = 0;  // each host of `server_hosts`, the same
  int port = 2222;              // the k-th role on a host listens on port + k
};

// Host of every role: ps 0..P-1 then workers 0..W-1; hosts are numbered
// worker hosts first, then the server hosts (one per shard of their own).
struct RolePlacement {
  std::vector<int> ps_host;
  std::vector<int> worker_host;
  int num_hosts = 0;
};
RolePlacement PlaceRoles(const EmulatedLayout& layout);

class EmulatedCluster {
 public:
  // Creates the hosts (`subnet` as EmulatedHosts::Create) and caps their
  // links. FailedPrecondition saying why where this machine cannot (not
  // root, no `ip`, no `tc` for capped links).
  static absl::StatusOr<std::unique_ptr<EmulatedCluster>> Create(const EmulatedLayout& layout, int subnet);

  const RolePlacement& placement() const { return placement_; }
  // "addr:port,..." for --ps_hosts and --worker_hosts.
  const std::string& ps_hosts() const { return ps_hosts_; }
  const std::string& worker_hosts() const { return worker_hosts_; }
  // The argv prefix that runs a program on the host of ps `index` or
  // worker `index`.
  std::vector<std::string> RunPs(int index) const { return hosts_->RunOn(placement_.ps_host[index]); }
  std::vector<std::string> RunWorker(int index) const { return hosts_->RunOn(placement_.worker_host[index]); }
  // e.g. "4 hosts (10.214.3.1-4), links 0.8 Gbit/s".
  std::string Describe() const;
  // Caps every host's link (worker hosts and hosts that run only shards) at
  // `gbps` each way, as tc applies it, while the roles run.
  absl::Status SetLinks(double gbps);

 private:
  EmulatedCluster() = default;
  std::unique_ptr<EmulatedHosts> hosts_;
  RolePlacement placement_;
  std::string ps_hosts_, worker_hosts_;
  double link_gbps_ = 0;
  double server_link_gbps_ = 0;
  int num_worker_hosts_ = 0;
};

}  // namespace pstrain::launch
