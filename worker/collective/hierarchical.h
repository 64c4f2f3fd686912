// Hierarchical all-reduce (Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE) over any
// host collective: with several workers per host, the gradients are first
// summed inside each host, then all-reduced between one worker per host (the
// host's leader: its lowest worker index), then broadcast back inside each
// host. Only the leaders' traffic crosses hosts.
//
// Built from three communicators of the same backend: the workers of this
// host, the leaders (on leaders only), and all workers (broadcast, barrier).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/collective/collective.h"

namespace pstrain {

// The host of each worker for hierarchical all-reduce: `workers_per_host` > 0
// groups consecutive worker indices; 0 groups the workers whose host names
// (from cluster.worker_hosts) are equal. Host ids count from 0 in order of
// first appearance. InvalidArgument when workers_per_host does not divide
// the workers, or a host entry does not parse.
absl::StatusOr<std::vector<int>> HostsOfWorkers(const std::vector<std::string>& worker_hosts, int workers_per_host);

// `options` describe this worker in the whole job (rank = worker index, size =
// workers; members empty); `host_of` is HostsOfWorkers' answer. Creates the
// communicators with `backend` (their prefixes derived from
// options.prefix) and returns one Collective whose AllReduceSum is
// hierarchical and whose Broadcast and Barrier span all workers.
absl::StatusOr<std::unique_ptr<Collective>> CreateHierarchicalCollective(const CollectiveEntry& backend,
                                                                         const CollectiveOptions& options,
                                                                         const std::vector<int>& host_of);

}  // namespace pstrain
