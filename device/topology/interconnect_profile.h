// InterconnectProfile: what joins the devices of one host to each other and
// to the host's memory (emulation.topology, docs/EMULATION.md "Inside a
// host"). A profile is a graph of nodes (memory and CPU of each socket,
// PCIe switches, devices) whose edges are a pair of links, one per
// direction, each with its rate; a copy between two endpoints crosses the
// links of the fewest-hop route that passes through no other device (a GPU
// does not forward a peer's copy). The host endpoint is socket 0's memory,
// where pinned buffers live.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "device/topology/flow_model.h"

namespace pstrain {

// The host endpoint of a copy (device endpoints are 0, 1, ...).
inline constexpr int kHostEndpoint = -1;

struct InterconnectProfile {
  std::string name;     // emulation.topology
  std::string summary;  // one line
  int devices = 0;
  std::vector<Link> links;
  // paths[from + 1][to + 1]: the links a copy from `from` to `to` crosses
  // (kHostEndpoint or a device); use Path().
  std::vector<std::vector<std::vector<int>>> paths;
  // Host memory: the links a pass over host memory reads and writes through
  // (sums formed on the host).
  int memory_read_link = -1;
  int memory_write_link = -1;
  // The order NCCL-style rings visit the devices (a ring over the first n
  // devices visits them in this order, skipping the others).
  std::vector<int> ring_order;
  // The share of a device's compute a collective kernel takes while it runs.
  double collective_compute_share = 0;
  // Where every figure comes from, one line each.
  std::vector<std::string> sources;

  const std::vector<int>& Path(int from, int to) const { return paths[from + 1][to + 1]; }
  // ring_order restricted to devices [0, n).
  std::vector<int> Ring(int n) const;
};

// The flows (path, bytes) of an all-reduce of `bytes` held by each of
// devices [0, devices) along profile.Ring(devices), as NCCL's ring moves
// it: a reduce-scatter and an all-gather of n - 1 steps each, every device
// sending bytes / n to the next per step. The 2 (n - 1) steps are one flow
// of 2 (n - 1) / n x bytes per ring link (no latency is modelled, so the
// time is the same while nothing else shares the links). None for n < 2.
std::vector<std::pair<std::vector<int>, double>> RingAllReduceFlows(const InterconnectProfile& profile, int devices,
                                                                    int64_t bytes);

// The profiles by name: "p100_pcie", "v100_nvlink".
const std::vector<InterconnectProfile>& InterconnectProfiles();
std::vector<std::string> InterconnectProfileNames();
// NotFound listing the names for an unknown one.
absl::StatusOr<const InterconnectProfile*> FindInterconnectProfile(const std::string& name);

}  // namespace pstrain
