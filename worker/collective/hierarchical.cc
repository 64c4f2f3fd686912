#include "worker/collective/hierarchical.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

class HierarchicalCollective : public Collective {
 public:
  HierarchicalCollective(int rank, int size, std::unique_ptr<Collective> world, std::unique_ptr<Collective> local,
                         std::unique_ptr<Collective> leaders)
      : rank_(rank), size_(size), world_(std::move(world)), local_(std::move(local)), leaders_(std::move(leaders)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // Sum inside the host, across the leaders, back inside the host. (The host
  // step sums to every local worker; the leader's copy is the one that goes
  // on. Equal on every worker of the host, so any could.)
  absl::Status AllReduceSumTyped(void* data, size_t count, WireDType dtype) override {
    PSTRAIN_RETURN_IF_ERROR(local_->AllReduceSumTyped(data, count, dtype));
    if (leaders_ != nullptr) PSTRAIN_RETURN_IF_ERROR(leaders_->AllReduceSumTyped(data, count, dtype));
    return local_->BroadcastTyped(data, count, dtype, /*root=*/0);  // the leader is local rank 0
  }
  absl::Status BroadcastTyped(void* data, size_t count, WireDType dtype, int root) override {
    return world_->BroadcastTyped(data, count, dtype, root);
  }
  absl::Status Barrier() override { return world_->Barrier(); }

 private:
  const int rank_;
  const int size_;
  std::unique_ptr<Collective> world_;
  std::unique_ptr<Collective> local_;
  std::unique_ptr<Collective> leaders_;  // null unless this worker leads its host
};

}  // namespace

absl::StatusOr<std::vector<int>> HostsOfWorkers(const std::vector<std::string>& worker_hosts, int workers_per_host) {
  const int n = static_cast<int>(worker_hosts.size());
  std::vector<int> host_of(n);
  if (workers_per_host > 0) {
    if (n % workers_per_host != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("workers_per_host ", workers_per_host, " does not divide the ", n, " workers"));
    }
    for (int w = 0; w < n; ++w) host_of[w] = w / workers_per_host;
    return host_of;
  }
  std::map<std::string, int> ids;
  for (int w = 0; w < n; ++w) {
    PSTRAIN_ASSIGN_OR_RETURN(const HostPort hp, ParseHostPort(worker_hosts[w]));
    host_of[w] = ids.emplace(hp.host, static_cast<int>(ids.size())).first->second;
  }
  return host_of;
}

absl::StatusOr<std::unique_ptr<Collective>> CreateHierarchicalCollective(const CollectiveEntry& backend,
                                                                         const CollectiveOptions& options,
                                                                         const std::vector<int>& host_of) {
  if (!backend.create) return absl::InvalidArgumentError("hierarchical all-reduce needs a host collective");
  if (static_cast<int>(host_of.size()) != options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("hierarchical all-reduce: ", host_of.size(), " host entries for ", options.size, " workers"));
  }
  const int my_host = host_of[options.rank];
  std::vector<int> local, leaders;
  for (int w = 0; w < options.size; ++w) {
    if (host_of[w] == my_host) local.push_back(w);
    if (std::find(host_of.begin(), host_of.begin() + w, host_of[w]) == host_of.begin() + w) leaders.push_back(w);
  }
  auto position = [](const std::vector<int>& members, int w) {
    return static_cast<int>(std::find(members.begin(), members.end(), w) - members.begin());
  };

  CollectiveOptions world = options;
  world.prefix = absl::StrCat(options.prefix, "/world");
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Collective> all, backend.create(world));

  CollectiveOptions host = options;
  host.members = local;
  host.rank = position(local, options.rank);
  host.size = static_cast<int>(local.size());
  host.prefix = absl::StrCat(options.prefix, "/host", my_host);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Collective> local_comm, backend.create(host));

  std::unique_ptr<Collective> leader_comm;
  if (local.front() == options.rank) {  // this worker leads its host
    CollectiveOptions cross = options;
    cross.members = leaders;
    cross.rank = position(leaders, options.rank);
    cross.size = static_cast<int>(leaders.size());
    cross.prefix = absl::StrCat(options.prefix, "/leaders");
    PSTRAIN_ASSIGN_OR_RETURN(leader_comm, backend.create(cross));
  }
  return std::unique_ptr<Collective>(new HierarchicalCollective(options.rank, options.size, std::move(all),
                                                                std::move(local_comm), std::move(leader_comm)));
}

}  // namespace pstrain
