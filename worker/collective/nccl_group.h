// NcclGroup: the NCCL communicators of one worker process, one per local GPU
// replica, all members of one job-wide communicator (ranks = workers x
// replicas: rank = worker * replicas_per_worker + replica).
//
// Rendezvous: rank 0 creates the NCCL unique id and publishes it in the
// cluster's key-value store (the chief's KvStoreService, the same store the
// Gloo ring uses); everyone else reads it from there. A single-worker group
// (replicated with all_reduce_spec nccl) needs no store.
//
// Every rank needs a GPU of its own: NCCL (since 2.5) refuses two ranks of
// one communicator on the same GPU; Create() says so for local replicas, and
// names the likely cause when NCCL reports it across processes.
//
// Deadlines: communicators are created non-blocking and every wait (joining,
// each collective) polls with a deadline; on expiry the communicators are
// aborted (ncclCommAbort) and the error names this worker and the timeout, so
// a dead peer never hangs a worker. After an error the group is broken:
// later calls fail at once.
//
// Threads: AllReduceMean(r, ...) and Broadcast(r, ...) for replica r are
// called from replica r's thread (its GPU current), each on its own
// communicator (NCCL's one-thread-per-GPU mode); every rank issues the same
// collectives in the same order. WaitAll() waits for every queued collective.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class KeyValueStore;

struct NcclGroupOptions {
  int worker_index = 0;
  int num_workers = 1;
  // The local replicas' GPUs (ordinals), one communicator each.
  std::vector<int> devices;
  // Required when num_workers > 1; not owned.
  KeyValueStore* store = nullptr;
  // Store key of the unique id; every worker of one group uses the same.
  std::string key = "nccl/unique_id";
  // Deadline for everyone to join, and for each collective.
  absl::Duration join_timeout = absl::Seconds(60);
  absl::Duration op_timeout = absl::Seconds(60);
};

class NcclGroup {
 public:
  static absl::StatusOr<std::unique_ptr<NcclGroup>> Create(const NcclGroupOptions& options);
  ~NcclGroup();

  int num_ranks() const { return num_ranks_; }
  int rank_of(int replica) const { return first_rank_ + replica; }

  // Queues an in-place mean over all ranks of `count` floats at `data` (on
  // replica's GPU) on `stream`.
  absl::Status AllReduceMean(int replica, float* data, size_t count, cudaStream_t stream);
  // Queues an in-place sum (e.g. of report tables).
  absl::Status AllReduceSum(int replica, float* data, size_t count, cudaStream_t stream);
  // Queues a copy of rank `root`'s `count` floats into every rank's `data`.
  absl::Status Broadcast(int replica, float* data, size_t count, int root, cudaStream_t stream);
  // Waits until `stream` (replica's) has finished, polling NCCL for errors;
  // aborts the group past op_timeout.
  absl::Status Wait(int replica, cudaStream_t stream);

 private:
  NcclGroup() = default;
  absl::Status Check(int replica, ncclResult_t result, const char* what);
  absl::Status Fail(absl::Status status);
  absl::Status WaitForComms(absl::Time deadline, const char* what);
  void AbortAll();

  NcclGroupOptions options_;
  int num_ranks_ = 0;
  int first_rank_ = 0;
  std::vector<ncclComm_t> comms_;  // [replica]
  absl::Mutex mu_;
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
