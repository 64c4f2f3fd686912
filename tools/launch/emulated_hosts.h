// EmulatedHosts: several hosts on one Linux machine, each a network
// namespace with its own IPv4 address on one bridge (iproute2: netns, veth,
// bridge), so a cluster's processes talk over real interfaces with real
// addresses, as on separate machines. Tests that play a Kubernetes operator
// run each pod's command on its own host (tests/integration/deploy_test.cc).
//
// Host i is namespace "<prefix>h<i>" with address 10.<subnet_hi>.<subnet_lo>.<i+1>/24
// on interface eth0 (and lo up); the bridge is "<prefix>br" in the calling
// namespace. Each host gets an /etc/hosts naming every host (its names and
// address), which `ip netns exec` mounts over /etc/hosts: the names a
// manifest uses (pod DNS names) resolve there unchanged.
//
// Needs root (CAP_NET_ADMIN) and `ip`; Create says which is missing.
// Everything made is removed by the destructor (namespaces, bridge, the
// /etc/netns files), also after a partial Create.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launch {

// OK when this process can create emulated hosts; FailedPrecondition saying
// why not (not root, no `ip` on PATH, network namespaces unsupported).
absl::Status CanEmulateHosts();

class EmulatedHosts {
 public:
  // One host per entry of `names` (each host's DNS names, e.g. a pod's
  // "job-ps-0.default.svc"). `subnet` picks the /24 (0..65535) so that
  // concurrent users do not collide.
  static absl::StatusOr<std::unique_ptr<EmulatedHosts>> Create(const std::vector<std::vector<std::string>>& names,
                                                               int subnet);
  ~EmulatedHosts();
  EmulatedHosts(const EmulatedHosts&) = delete;
  EmulatedHosts& operator=(const EmulatedHosts&) = delete;

  int size() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int host) const { return addresses_[host]; }
  const std::string& namespace_name(int host) const { return namespaces_[host]; }
  // The argv prefix that runs a program on `host`: /path/to/ip netns exec
  // <namespace> (an absolute path: for execv), behind /path/to/taskset -c
  // <cpus> once the host has CPUs of its own (RunOnCpus).
  std::vector<std::string> RunOn(int host) const;
  // From now on RunOn(host) runs programs on `cpus` alone (host_cpus.h: a
  // host's own CPUs; disjoint from other hosts' is the caller's choice).
  // InvalidArgument for no such host or no CPU; FailedPrecondition without
  // util-linux's `taskset` on PATH.
  absl::Status RunOnCpus(int host, const std::vector<int>& cpus);
  // What RunOnCpus gave `host` (empty: every CPU this process may use).
  const std::vector<int>& cpus(int host) const { return cpus_[host]; }
  // Caps `host`'s link at `gbps` gigabits per second in each direction: a
  // token bucket (tc tbf) on its eth0 for what it sends and on its bridge
  // port for what it receives, counting Ethernet frames (so TCP payload
  // gets about 95% of the rate). Replaces an earlier cap. Latency is not
  // emulated (netem is not available in every kernel). InvalidArgument for
  // a rate outside (0, 400]; FailedPrecondition without iproute2's `tc` or
  // the kernel's tbf.
  absl::Status LimitLink(int host, double gbps);

 private:
  EmulatedHosts(std::string prefix, std::string ip_path) : prefix_(std::move(prefix)), ip_path_(std::move(ip_path)) {}
  absl::Status AddHost(int index, const std::string& subnet_prefix);
  // Runs `ip args...`.
  absl::Status Ip(const std::vector<std::string>& args) const;

  const std::string prefix_;
  const std::string ip_path_;
  bool bridge_made_ = false;
  std::vector<std::string> namespaces_;
  std::vector<std::string> addresses_;
  std::string taskset_path_;            // found by the first RunOnCpus
  std::vector<std::vector<int>> cpus_;  // per host; empty: not pinned
};

}  // namespace pstrain::launch
