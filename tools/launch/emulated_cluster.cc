#include "tools/launch/emulated_cluster.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::launch {

RolePlacement PlaceRoles(const EmulatedLayout& layout) {
  RolePlacement placement;
  const int per_host = std::max(1, layout.workers_per_host);
  const int worker_hosts = std::max(1, (layout.num_workers + per_host - 1) / per_host);
  for (int w = 0; w < layout.num_workers; ++w) placement.worker_host.push_back(w / per_host);
  const int colocated = layout.num_ps - layout.server_hosts;
  for (int i = 0; i < layout.num_ps; ++i) {
    placement.ps_host.push_back(i < colocated ? i % worker_hosts : worker_hosts + (i - colocated));
  }
  placement.num_hosts = worker_hosts + layout.server_hosts;
  return placement;
}

absl::StatusOr<std::unique_ptr<EmulatedCluster>> EmulatedCluster::Create(const EmulatedLayout& layout, int subnet) {
  std::unique_ptr<EmulatedCluster> cluster(new EmulatedCluster);
  cluster->placement_ = PlaceRoles(layout);
  cluster->link_gbps_ = layout.link_gbps;
  cluster->server_link_gbps_ = layout.server_link_gbps;
  cluster->num_worker_hosts_ = cluster->placement_.num_hosts - layout.server_hosts;
  std::vector<std::vector<std::string>> names(cluster->placement_.num_hosts);
  for (int h = 0; h < cluster->placement_.num_hosts; ++h) names[h] = {absl::StrCat("host", h)};
  absl::StatusOr<std::unique_ptr<EmulatedHosts>> hosts = EmulatedHosts::Create(names, subnet);
  if (!hosts.ok()) return hosts.status();
  cluster->hosts_ = *std::move(hosts);
  for (int h = 0; h < cluster->placement_.num_hosts; ++h) {
    const double gbps = h < cluster->num_worker_hosts_ ? layout.link_gbps : layout.server_link_gbps;
    if (gbps <= 0) continue;
    if (absl::Status s = cluster->hosts_->LimitLink(h, gbps); !s.ok()) return s;
  }
  // Ports: the k-th role placed on a host gets port + k.
  std::map<int, int> used;
  auto host_port = [&](int host) {
    return absl::StrCat(cluster->hosts_->address(host), ":", layout.port + used[host]++);
  };
  std::vector<std::string> ps, workers;
  for (int host : cluster->placement_.ps_host) ps.push_back(host_port(host));
  for (int host : cluster->placement_.worker_host) workers.push_back(host_port(host));
  cluster->ps_hosts_ = absl::StrJoin(ps, ",");
  cluster->worker_hosts_ = absl::StrJoin(workers, ",");
  return cluster;
}

namespace {
std::string LinkRate(double gbps) { return gbps > 0 ? absl::StrCat(gbps, " Gbit/s each way") : "uncapped"; }
}  // namespace

std::string EmulatedCluster::Describe() const {
  std::string text = absl::StrCat(placement_.num_hosts, " emulated hosts (", hosts_->address(0), " to ",
                                  hosts_->address(placement_.num_hosts - 1), "), links ", LinkRate(link_gbps_));
  const int servers = placement_.num_hosts - num_worker_hosts_;
  if (servers > 0) {
    absl::StrAppend(&text, "; ", servers, " of them run only shards, links ", LinkRate(server_link_gbps_));
  }
  return text;
}

absl::Status EmulatedCluster::SetLinks(double gbps) {
  for (int h = 0; h < placement_.num_hosts; ++h) {
    if (absl::Status s = hosts_->LimitLink(h, gbps); !s.ok()) return s;
  }
  link_gbps_ = gbps;
  server_link_gbps_ = gbps;
  return absl::OkStatus();
}

}  // namespace pstrain::launch
