#include "device/topology/interconnect_profile.h"

#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

constexpr double kGB = 1e9;
// PCIe 3.0 x16, each direction: 15.75 GB/s raw; pinned cudaMemcpy reaches
// about 12 GB/s.
constexpr double kPcie3x16 = 12 * kGB;
// Two QPI links at 9.6 GT/s between the sockets, 2 bytes per transfer each.
constexpr double kQpi = 2 * 9.6 * 2 * kGB;
// Four channels of DDR4-2400 per socket (8 bytes x 2.4 GT/s each).
constexpr double kDdr4Socket = 4 * 8 * 2.4 * kGB;
// One NVLink 2.0 link, each direction.
constexpr double kNvlink2 = 25 * kGB;

// A graph of nodes joined by pairs of links, and its fewest-hop routes.
class Graph {
 public:
  int Node(std::string name, bool device) {
    names_.push_back(std::move(name));
    is_device_.push_back(device);
    adjacent_.emplace_back();
    return static_cast<int>(names_.size()) - 1;
  }
  // Joins a and b by a link each way at `rate` bytes/s; returns a->b's.
  int Edge(int a, int b, double rate) {
    const int forward = static_cast<int>(links_.size());
    links_.push_back({absl::StrCat(names_[a], "->", names_[b]), rate});
    links_.push_back({absl::StrCat(names_[b], "->", names_[a]), rate});
    adjacent_[a].push_back({b, forward});
    adjacent_[b].push_back({a, forward + 1});
    return forward;
  }
  // Breadth-first: the fewest hops, through no device but the ends.
  std::vector<int> Route(int from, int to) const {
    if (from == to) return {};
    std::vector<int> via_link(names_.size(), -1), previous(names_.size(), -1);
    std::deque<int> queue = {from};
    previous[from] = from;
    while (!queue.empty() && previous[to] < 0) {
      const int node = queue.front();
      queue.pop_front();
      if (node != from && is_device_[node]) continue;  // devices do not forward
      for (const auto& [next, link] : adjacent_[node]) {
        if (previous[next] >= 0) continue;
        previous[next] = node;
        via_link[next] = link;
        queue.push_back(next);
      }
    }
    CHECK_GE(previous[to], 0) << "no route from " << names_[from] << " to " << names_[to];
    std::vector<int> path;
    for (int node = to; node != from; node = previous[node]) path.insert(path.begin(), via_link[node]);
    return path;
  }
  std::vector<Link>& links() { return links_; }

 private:
  std::vector<std::string> names_;
  std::vector<bool> is_device_;
  std::vector<std::vector<std::pair<int, int>>> adjacent_;  // (neighbour, link from here)
  std::vector<Link> links_;
};

// Two sockets, each with its memory and two PCIe switches, each switch with
// two of the 8 devices; the host endpoint is socket 0's memory.
struct PcieHost {
  Graph graph;
  int memory = -1;
  int memory_read = -1;
  std::vector<int> devices;
};

PcieHost BuildPcieHost() {
  PcieHost host;
  Graph& g = host.graph;
  std::vector<int> cpus;
  for (int s = 0; s < 2; ++s) {
    const int memory = g.Node(absl::StrCat("memory", s), false);
    cpus.push_back(g.Node(absl::StrCat("cpu", s), false));
    const int read = g.Edge(memory, cpus[s], kDdr4Socket);
    if (s == 0) host.memory = memory, host.memory_read = read;
  }
  g.Edge(cpus[0], cpus[1], kQpi);
  for (int k = 0; k < 4; ++k) {
    const int sw = g.Node(absl::StrCat("switch", k), false);
    g.Edge(cpus[k / 2], sw, kPcie3x16);
    for (int j = 0; j < 2; ++j) {
      const int device = g.Node(absl::StrCat("device", 2 * k + j), true);
      g.Edge(sw, device, kPcie3x16);
      host.devices.push_back(device);
    }
  }
  return host;
}

InterconnectProfile Finish(InterconnectProfile profile, PcieHost host) {
  profile.devices = static_cast<int>(host.devices.size());
  auto node = [&](int endpoint) { return endpoint == kHostEndpoint ? host.memory : host.devices[endpoint]; };
  profile.paths.assign(profile.devices + 1, std::vector<std::vector<int>>(profile.devices + 1));
  for (int from = kHostEndpoint; from < profile.devices; ++from) {
    for (int to = kHostEndpoint; to < profile.devices; ++to) {
      profile.paths[from + 1][to + 1] = host.graph.Route(node(from), node(to));
    }
  }
  profile.memory_read_link = host.memory_read;
  profile.memory_write_link = host.memory_read + 1;
  profile.links = std::move(host.graph.links());
  return profile;
}

const std::vector<std::string>& PcieSources() {
  static const auto* sources = new std::vector<std::string>{
      "PCIe 3.0 x16 (device-switch and switch-CPU links): 12 GB/s each direction, what pinned cudaMemcpy reaches "
      "of the 15.75 GB/s the PCI-SIG specifies (CUDA samples' bandwidthTest on PCIe 3.0 x16 hosts)",
      "CPU to CPU: two QPI links at 9.6 GT/s, 2 bytes per transfer: 38.4 GB/s each direction (Intel Xeon E5-2600 "
      "v4 datasheet)",
      "host memory: four DDR4-2400 channels per socket, 76.8 GB/s (Intel Xeon E5-2600 v4 datasheet)",
      "collective kernels: 10% of a device's compute while they run; this model's assumption (NCCL runs its "
      "rings as kernels on a few of the device's multiprocessors), not a measured figure: "
      "emulation.collective_compute_share changes it",
  };
  return *sources;
}

InterconnectProfile P100Pcie() {
  InterconnectProfile profile;
  profile.name = "p100_pcie";
  profile.summary =
      "8 devices on PCIe 3.0 x16, two per switch, two switches per CPU socket, no NVLink (the single-node "
      "article's 8 x P100 server)";
  profile.ring_order = {0, 1, 2, 3, 4, 5, 6, 7};
  profile.collective_compute_share = 0.1;
  profile.sources = PcieSources();
  return Finish(std::move(profile), BuildPcieHost());
}

InterconnectProfile V100Nvlink() {
  PcieHost host = BuildPcieHost();
  // The hybrid cube mesh: each device's six links go to the three others of
  // its quad and to its counterpart in the other quad; the pairs listed
  // twice are joined by two links.
  const int pairs[][3] = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {1, 2, 2}, {1, 3, 1}, {2, 3, 1}, {0, 4, 2}, {1, 5, 2},
                          {2, 6, 2}, {3, 7, 2}, {4, 5, 1}, {4, 6, 1}, {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 1}};
  for (const auto& p : pairs) host.graph.Edge(host.devices[p[0]], host.devices[p[1]], p[2] * kNvlink2);
  InterconnectProfile profile;
  profile.name = "v100_nvlink";
  profile.summary =
      "8 devices in NVLink 2.0's hybrid cube mesh (25 GB/s per link and direction), on PCIe 3.0 to the host as "
      "p100_pcie (a DGX-1 with V100)";
  profile.ring_order = {0, 1, 2, 3, 7, 6, 5, 4};
  profile.collective_compute_share = 0.1;
  profile.sources = PcieSources();
  profile.sources.push_back(
      "NVLink 2.0: 25 GB/s per link and direction, six links per V100, joined as the hybrid cube mesh of NVIDIA's "
      "DGX-1 with Tesla V100 system architecture whitepaper");
  return Finish(std::move(profile), std::move(host));
}

}  // namespace

std::vector<int> InterconnectProfile::Ring(int n) const {
  std::vector<int> ring;
  for (int d : ring_order) {
    if (d < n) ring.push_back(d);
  }
  return ring;
}

std::vector<std::pair<std::vector<int>, double>> RingAllReduceFlows(const InterconnectProfile& profile, int devices,
                                                                    int64_t bytes) {
  const std::vector<int> ring = profile.Ring(devices);
  const int n = static_cast<int>(ring.size());
  std::vector<std::pair<std::vector<int>, double>> flows;
  if (n < 2) return flows;
  const double per_link = 2.0 * (n - 1) / n * static_cast<double>(bytes);
  for (int i = 0; i < n; ++i) flows.emplace_back(profile.Path(ring[i], ring[(i + 1) % n]), per_link);
  return flows;
}

const std::vector<InterconnectProfile>& InterconnectProfiles() {
  static const auto* profiles = new std::vector<InterconnectProfile>{P100Pcie(), V100Nvlink()};
  return *profiles;
}

std::vector<std::string> InterconnectProfileNames() {
  std::vector<std::string> names;
  for (const InterconnectProfile& p : InterconnectProfiles()) names.push_back(p.name);
  return names;
}

absl::StatusOr<const InterconnectProfile*> FindInterconnectProfile(const std::string& name) {
  for (const InterconnectProfile& p : InterconnectProfiles()) {
    if (p.name == name) return &p;
  }
  return absl::NotFoundError(absl::StrCat("no interconnect profile '", name,
                                          "' (known: ", absl::StrJoin(InterconnectProfileNames(), ", "), ")"));
}

}  // namespace pstrain
