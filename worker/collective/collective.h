// Collective: cross-worker collectives of host buffers for the `allreduce`
// strategy (Horovod-style: every worker holds the full model and the workers
// all-reduce their gradients, no parameter server).
//
// One Collective per worker process (or per communicator); ranks are workers.
// Implementations, registered by name (the config's `collective`): "gloo"
// (TCP ring, rendezvous through the chief's key-value store;
// gloo_collective.cc) and "mpi" (Open MPI, the workers being the ranks of one
// mpirun; mpi_collective.cc). "nccl" is registered too, for its properties:
// NCCL reduces device buffers and is driven by the NCCL strategy
// (worker/collective/nccl_group.h), not through this interface. No library
// types appear here.
//
// Contract for every implementation:
//  - Every rank calls the same operations in the same order with the same
//    counts (and root), as with MPI. Calls on one object are serialised.
//  - Every operation has a deadline (the options' timeout): a peer that died
//    or stopped participating yields an error naming this rank and the
//    timeout, never a hang.
//  - After a failed operation the communicator is broken: later calls fail
//    at once (FAILED_PRECONDITION quoting the first error). Make a new one
//    (with a fresh rendezvous prefix) to continue.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/registry.h"
#include "proto/ps.pb.h"

namespace pstrain {

class KeyValueStore;  // worker/collective/kv_store.h

class Collective {  // one per worker process; ranks = workers
 public:
  virtual ~Collective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sum over all ranks of `count` elements of `dtype` at `data`
  // (caller divides for the mean): float32, or 16-bit floats (compression
  // fp16/bf16; every addition rounds to the dtype, as Horovod's fp16
  // all-reduce does). count == 0 is a no-op.
  virtual absl::Status AllReduceSumTyped(void* data, size_t count, WireDType dtype) = 0;
  // Copies `count` elements of `dtype` at `data` on rank `root` into `data`
  // on every rank.
  virtual absl::Status BroadcastTyped(void* data, size_t count, WireDType dtype, int root) = 0;
  // The float32 forms.
  absl::Status AllReduceSum(float* data, size_t count) { return AllReduceSumTyped(data, count, DT_FLOAT32); }
  absl::Status Broadcast(float* data, size_t count, int root) { return BroadcastTyped(data, count, DT_FLOAT32, root); }
  // Returns once every rank has entered the barrier.
  virtual absl::Status Barrier() = 0;
};

struct CollectiveOptions {
  // This rank's position among the communicator's members, and their number.
  int rank = 0;
  int size = 1;
  // The workers (job-wide indices, ascending) the communicator spans, when
  // it is a subgroup (hierarchical all-reduce); empty: every worker, rank
  // being the worker index. Every member passes the same list.
  std::vector<int> members;
  // gloo: the address (e.g. "10.0.0.5", "127.0.0.1") or interface name (e.g.
  // "eth0") this rank listens on for its peers; they must be able to reach
  // it. Required: a worker passes its own host from cluster.worker_hosts.
  std::string host;
  // gloo: rendezvous store (not owned; used only while creating): the
  // chief's KvStoreService, through a TransportKeyValueStore or, in the
  // chief, its local_store().
  KeyValueStore* store = nullptr;
  // Keys are "<prefix>/<rank>", so several communicators (and runs) can share
  // one store. Every rank of one communicator uses the same prefix.
  std::string prefix = "gloo";
  // Deadline of every operation (all-reduce, broadcast, barrier).
  absl::Duration timeout = absl::Seconds(60);
  // Deadline for all ranks to join and connect (they may start at different
  // times, e.g. timeouts.startup_seconds). Zero: `timeout`. (A peer that dies
  // after publishing its address but before connecting is noticed by Gloo's
  // own connect wait, which is 5 x this.)
  absl::Duration connect_timeout = absl::ZeroDuration();
};

// A collective library, by the config's `collective`.
struct CollectiveEntry {
  // Where the buffers it reduces live: true for host memory (gloo, mpi; GPU
  // replicas then keep host mirrors), false for device memory (nccl).
  bool host_buffers = true;
  // It meets its peers through the chief's key-value store (gloo; nccl, whose
  // unique id the chief publishes there); false when its launcher already
  // did (mpi: mpirun).
  bool needs_store = false;
  // The workers must be the ranks of one mpirun (pstrain-launch starts it).
  bool launched_by_mpirun = false;
  // Joins a communicator of host buffers; null for device collectives.
  std::function<absl::StatusOr<std::unique_ptr<Collective>>(const CollectiveOptions& options)> create;
};

Registry<CollectiveEntry>& CollectiveRegistry();

// Joins the communicator: publishes this rank's addresses in the store,
// waits for every other rank's, and connects a full TCP mesh (Gloo's
// rendezvous::Context::connectFullMesh). All-reduce is Gloo's ring algorithm.
// Errors: INVALID_ARGUMENT for bad options; DEADLINE_EXCEEDED naming the
// ranks that did not join within connect_timeout; UNAVAILABLE when the host
// cannot be bound or a peer cannot be reached.
absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(const CollectiveOptions& options);

}  // namespace pstrain
