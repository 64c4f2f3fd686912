#include "worker/collective/nccl_group.h"

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

constexpr absl::Duration kPoll = absl::Microseconds(50);

std::string NcclError(ncclResult_t r) { return ncclGetErrorString(r); }

}  // namespace

absl::StatusOr<std::unique_ptr<NcclGroup>> NcclGroup::Create(const NcclGroupOptions& options) {
  if (options.devices.empty()) return absl::InvalidArgumentError("NCCL group: no local GPUs");
  if (options.num_workers > 1 && options.store == nullptr) {
    return absl::InvalidArgumentError("NCCL group across workers needs the cluster's key-value store");
  }
  for (size_t i = 0; i < options.devices.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (options.devices[i] == options.devices[j]) {
        return absl::FailedPreconditionError(absl::StrCat(
            "NCCL group: replicas ", j, " and ", i, " are both on gpu:", options.devices[i],
            "; NCCL refuses two ranks on one GPU, so devices_per_worker must not exceed the GPUs of the machine"));
      }
    }
  }
  std::unique_ptr<NcclGroup> group(new NcclGroup);
  group->options_ = options;
  const int local = static_cast<int>(options.devices.size());
  group->num_ranks_ = options.num_workers * local;
  group->first_rank_ = options.worker_index * local;

  // The unique id: made by rank 0, handed out through the store.
  ncclUniqueId id;
  const absl::Time join_deadline = absl::Now() + options.join_timeout;
  if (options.worker_index == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("ncclGetUniqueId: ", NcclError(r)));
    }
    if (options.num_workers > 1) {
      PSTRAIN_RETURN_IF_ERROR(options.store->Set(
          options.key, std::string(reinterpret_cast<const char*>(id.internal), sizeof(id.internal)), join_deadline));
    }
  } else {
    auto value = options.store->Get(options.key, join_deadline);
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat("worker ", options.worker_index,
                                       ": waiting for the NCCL unique id from the chief: ", value.status().message()));
    }
    if (value->size() != sizeof(id.internal)) {
      return absl::InternalError(
          absl::StrCat("NCCL unique id from the store has ", value->size(), " bytes, want ", sizeof(id.internal)));
    }
    std::memcpy(id.internal, value->data(), sizeof(id.internal));
  }

  // One non-blocking communicator per local GPU, created together.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  group->comms_.assign(local, nullptr);
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < local && (r == ncclSuccess || r == ncclInProgress); ++i) {
    cudaSetDevice(options.devices[i]);
    r = ncclCommInitRankConfig(&group->comms_[i], group->num_ranks_, id, group->first_rank_ + i, &config);
  }
  ncclResult_t end = ncclGroupEnd();
  if ((r != ncclSuccess && r != ncclInProgress) || (end != ncclSuccess && end != ncclInProgress)) {
    group->AbortAll();
    return absl::InternalError(absl::StrCat("ncclCommInitRankConfig: ", NcclError(r != ncclSuccess ? r : end)));
  }
  absl::Status joined = group->WaitForComms(join_deadline, "joining the NCCL communicator");
  if (!joined.ok()) return joined;
  LOG(INFO) << "worker " << options.worker_index << ": NCCL ranks " << group->first_rank_ << "-"
            << group->first_rank_ + local - 1 << " of " << group->num_ranks_ << " joined";
  return group;
}

NcclGroup::~NcclGroup() {
  bool healthy;
  {
    absl::MutexLock lock(&mu_);
    healthy = broken_.ok();
  }
  if (healthy) {
    // Finalize flushes outstanding work; on non-blocking communicators it
    // completes asynchronously, so wait (bounded) before destroying.
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) ncclCommFinalize(comm);
    }
    healthy = WaitForComms(absl::Now() + options_.op_timeout, "finalizing the NCCL communicator").ok();
  }
  for (ncclComm_t comm : comms_) {
    if (comm == nullptr) continue;
    if (healthy) {
      ncclCommDestroy(comm);
    } else {
      ncclCommAbort(comm);
    }
  }
}

void NcclGroup::AbortAll() {
  for (ncclComm_t& comm : comms_) {
    if (comm != nullptr) ncclCommAbort(comm);
    comm = nullptr;
  }
}

absl::Status NcclGroup::Fail(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (broken_.ok()) broken_ = status;
  return status;
}

absl::Status NcclGroup::WaitForComms(absl::Time deadline, const char* what) {
  for (size_t i = 0; i < comms_.size(); ++i) {
    while (true) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(comms_[i], &state);
      if (r != ncclSuccess) state = r;
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) {
        AbortAll();
        return Fail(absl::InternalError(absl::StrCat(
            "worker ", options_.worker_index, ": ", what, ": ", NcclError(state),
            state == ncclInvalidUsage ? " (NCCL refuses two ranks on one GPU: give each worker process its own "
                                        "GPUs, e.g. with CUDA_VISIBLE_DEVICES)"
                                      : "")));
      }
      if (absl::Now() > deadline) {
        AbortAll();
        return Fail(absl::DeadlineExceededError(
            absl::StrCat("worker ", options_.worker_index, ": ", what, ": peers did not answer within the deadline")));
      }
      absl::SleepFor(kPoll);
    }
  }
  return absl::OkStatus();
}

absl::Status NcclGroup::Check(int replica, ncclResult_t result, const char* what) {
  if (result == ncclSuccess || result == ncclInProgress) {
    // A non-blocking communicator may still be enqueuing: wait for that.
    if (result == ncclInProgress) {
      const absl::Time deadline = absl::Now() + options_.op_timeout;
      ncclResult_t state = ncclInProgress;
      while (state == ncclInProgress) {
        if (ncclCommGetAsyncError(comms_[replica], &state) != ncclSuccess) break;
        if (state == ncclInProgress && absl::Now() > deadline) {
          AbortAll();
          return Fail(absl::DeadlineExceededError(
              absl::StrCat("worker ", options_.worker_index, ": ", what, " did not start within the deadline")));
        }
        if (state == ncclInProgress) absl::SleepFor(kPoll);
      }
      if (state != ncclSuccess) {
        AbortAll();
        return Fail(
            absl::InternalError(absl::StrCat("worker ", options_.worker_index, ": ", what, ": ", NcclError(state))));
      }
    }
    return absl::OkStatus();
  }
  AbortAll();
  return Fail(absl::InternalError(absl::StrCat("worker ", options_.worker_index, ": ", what, ": ", NcclError(result))));
}

#define PSTRAIN_NCCL_BROKEN_GUARD()                                                                    \
  do {                                                                                                 \
    absl::MutexLock lock(&mu_);                                                                        \
    if (!broken_.ok()) {                                                                               \
      return absl::FailedPreconditionError(absl::StrCat("NCCL group is broken: ", broken_.message())); \
    }                                                                                                  \
  } while (0)

absl::Status NcclGroup::AllReduceMean(int replica, float* data, size_t count, cudaStream_t stream) {
  PSTRAIN_NCCL_BROKEN_GUARD();
  if (count == 0) return absl::OkStatus();
  return Check(replica, ncclAllReduce(data, data, count, ncclFloat32, ncclAvg, comms_[replica], stream),
               "ncclAllReduce(avg)");
}

absl::Status NcclGroup::AllReduceSum(int replica, float* data, size_t count, cudaStream_t stream) {
  PSTRAIN_NCCL_BROKEN_GUARD();
  if (count == 0) return absl::OkStatus();
  return Check(replica, ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comms_[replica], stream),
               "ncclAllReduce(sum)");
}

absl::Status NcclGroup::Broadcast(int replica, float* data, size_t count, int root, cudaStream_t stream) {
  PSTRAIN_NCCL_BROKEN_GUARD();
  if (count == 0) return absl::OkStatus();
  return Check(replica, ncclBroadcast(data, data, count, ncclFloat32, root, comms_[replica], stream), "ncclBroadcast");
}

absl::Status NcclGroup::Wait(int replica, cudaStream_t stream) {
  PSTRAIN_NCCL_BROKEN_GUARD();
  const absl::Time deadline = absl::Now() + options_.op_timeout;
  while (true) {
    cudaError_t q = cudaStreamQuery(stream);
    if (q == cudaSuccess) return absl::OkStatus();
    if (q != cudaErrorNotReady) {
      AbortAll();
      return Fail(absl::InternalError(
          absl::StrCat("worker ", options_.worker_index, ": GPU stream failed: ", cudaGetErrorString(q))));
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comms_[replica], &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      AbortAll();
      return Fail(absl::InternalError(
          absl::StrCat("worker ", options_.worker_index, ": NCCL collective failed: ", NcclError(state))));
    }
    if (absl::Now() > deadline) {
      AbortAll();
      return Fail(absl::DeadlineExceededError(
          absl::StrCat("worker ", options_.worker_index, ": NCCL collective did not finish within ",
                       absl::FormatDuration(options_.op_timeout), " (a peer died or stopped participating)")));
    }
    absl::SleepFor(kPoll);
  }
}

namespace {

// NCCL reduces device buffers; the NCCL strategy drives it (no host create).
const bool kRegistered = CollectiveRegistry().Register(
    "nccl", {.host_buffers = false, .needs_store = true, .launched_by_mpirun = false, .create = nullptr});

}  // namespace
}  // namespace pstrain
