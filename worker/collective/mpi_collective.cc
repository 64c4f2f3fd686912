// The "mpi" collective: Open MPI, the workers being the ranks of one mpirun
// (Horovod's usual launch; Kubeflow's MPIJob). MPI_COMM_WORLD's rank must be
// the worker's index and its size the number of workers; a subgroup
// (hierarchical all-reduce) is a communicator of its members
// (MPI_Comm_create_group).
//
// Deadlines: MPI collectives cannot be abandoned half-way, and blocking ones
// are the fast ones (shared memory within a host, tuned algorithms), so each
// operation runs blocking under a watchdog: when it has not returned by the
// timeout, the watchdog logs what was waited for (rank, operation, timeout)
// and calls MPI_Abort, which ends every rank of the job through mpirun. A
// rank that dies is noticed by mpirun, which ends the others. Nothing hangs.
//
// MPI is initialised once per process with MPI_THREAD_MULTIPLE (operations
// come from the communication thread and the training thread, one at a time;
// the watchdog may abort from its own) and finalised at exit.
#include <mpi.h>

#include <cstdlib>
#include <limits>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/compression/compression.h"
#include "common/status_macros.h"
#include "glog/logging.h"
#include "worker/collective/collective.h"

namespace pstrain {
namespace {

// MPI_Init_thread once per process; MPI_Finalize at exit.
absl::Status InitializeMpi() {
  static absl::Mutex mu;
  static absl::Status status ABSL_GUARDED_BY(mu);
  static bool done ABSL_GUARDED_BY(mu) = false;
  absl::MutexLock lock(&mu);
  if (done) return status;
  done = true;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = MPI_THREAD_SINGLE;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      status = absl::UnavailableError("mpi: MPI_Init_thread failed");
      return status;
    }
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
    if (provided < MPI_THREAD_MULTIPLE) {
      status = absl::FailedPreconditionError(
          absl::StrCat("mpi: this MPI provides thread level ", provided, " but pstrain needs MPI_THREAD_MULTIPLE"));
      return status;
    }
  }
  return status;
}

// Sums of 16-bit floats, which MPI has no type for: MPI_UINT16_T elements
// with a user-defined commutative operation that adds them as floats.
template <WireDType kDType>
void SumEncoded(void* in, void* inout, int* len, MPI_Datatype*) {
  AddEncoded(kDType, in, inout, static_cast<size_t>(*len), inout);
}

struct MpiType {
  MPI_Datatype datatype;
  MPI_Op sum;
};

// The MPI datatype and sum of `dtype`; the 16-bit operations are created
// once, after MPI_Init (and never freed: MPI_Finalize releases them).
absl::StatusOr<MpiType> TypeOf(WireDType dtype) {
  if (dtype == DT_FLOAT32) return MpiType{MPI_FLOAT, MPI_SUM};
  static const MPI_Op fp16 = [] {
    MPI_Op op;
    MPI_Op_create(&SumEncoded<DT_FLOAT16>, /*commute=*/1, &op);
    return op;
  }();
  static const MPI_Op bf16 = [] {
    MPI_Op op;
    MPI_Op_create(&SumEncoded<DT_BFLOAT16>, /*commute=*/1, &op);
    return op;
  }();
  if (dtype == DT_FLOAT16) return MpiType{MPI_UINT16_T, fp16};
  if (dtype == DT_BFLOAT16) return MpiType{MPI_UINT16_T, bf16};
  return absl::InvalidArgumentError(absl::StrCat("mpi: unknown element type ", dtype));
}

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

class MpiCollective : public Collective {
 public:
  MpiCollective(const CollectiveOptions& options, MPI_Comm comm, int world_rank)
      : rank_(options.rank),
        size_(options.size),
        world_rank_(world_rank),
        prefix_(options.prefix),
        timeout_(options.timeout),
        comm_(comm) {
    watchdog_ = std::thread([this] { Watch(); });
  }

  ~MpiCollective() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    watchdog_.join();
    if (comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status AllReduceSumTyped(void* data, size_t count, WireDType dtype) override {
    if (count == 0) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(CheckCount(count));
    PSTRAIN_ASSIGN_OR_RETURN(const MpiType type, TypeOf(dtype));
    return Run(absl::StrCat("all-reduce of ", count, " ", WireDTypeElements(dtype)), [&] {
      return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type.datatype, type.sum, comm_);
    });
  }

  absl::Status BroadcastTyped(void* data, size_t count, WireDType dtype, int root) override {
    if (root < 0 || root >= size_) {
      return absl::InvalidArgumentError(absl::StrCat("mpi broadcast: root ", root, " out of range [0, ", size_, ")"));
    }
    if (count == 0) return absl::OkStatus();
    PSTRAIN_RETURN_IF_ERROR(CheckCount(count));
    PSTRAIN_ASSIGN_OR_RETURN(const MpiType type, TypeOf(dtype));
    return Run(absl::StrCat("broadcast of ", count, " ", WireDTypeElements(dtype), " from rank ", root),
               [&] { return MPI_Bcast(data, static_cast<int>(count), type.datatype, root, comm_); });
  }

  absl::Status Barrier() override {
    return Run("barrier", [&] { return MPI_Barrier(comm_); });
  }

 private:
  // MPI counts are ints.
  static absl::Status CheckCount(size_t count) {
    if (count > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("mpi: ", count, " floats in one operation (at most 2^31-1)"));
    }
    return absl::OkStatus();
  }

  // Runs one blocking operation under the watchdog.
  template <typename Op>
  absl::Status Run(const std::string& what, Op op) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      operation_ = what;
      deadline_ = absl::Now() + timeout_;
      ++generation_;
    }
    const int code = op();
    {
      absl::MutexLock lock(&mu_);
      operation_.clear();
      deadline_ = absl::InfiniteFuture();
      ++generation_;
    }
    if (code != MPI_SUCCESS) {
      return absl::UnavailableError(absl::StrCat("mpi ", what, " failed on rank ", rank_, " of ", size_,
                                                 " (communicator \"", prefix_, "\"): ", MpiError(code)));
    }
    return absl::OkStatus();
  }

  // An operation began or ended, or the collective is going away.
  bool Changed() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || generation_ != watched_; }

  // Aborts the job when an operation outlives its deadline.
  void Watch() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      watched_ = generation_;
      mu_.AwaitWithDeadline(absl::Condition(this, &MpiCollective::Changed), deadline_);
      if (stopping_) return;
      if (generation_ != watched_ || operation_.empty() || absl::Now() < deadline_) continue;
      LOG(ERROR) << "mpi " << operation_ << " on rank " << rank_ << " of " << size_ << " (worker " << world_rank_
                 << ", communicator \"" << prefix_ << "\") did not finish within " << absl::FormatDuration(timeout_)
                 << ": a peer died or stopped participating; aborting the MPI job";
      MPI_Abort(MPI_COMM_WORLD, 1);
      std::_Exit(1);
    }
  }

  const int rank_;
  const int size_;
  const int world_rank_;
  const std::string prefix_;
  const absl::Duration timeout_;
  MPI_Comm comm_;
  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // operations begun and ended
  uint64_t watched_ ABSL_GUARDED_BY(mu_) = 0;     // the generation the watchdog waits out
  std::string operation_ ABSL_GUARDED_BY(mu_);    // running now; empty between operations
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watchdog_;
};

absl::StatusOr<std::unique_ptr<Collective>> CreateMpiCollective(const CollectiveOptions& options) {
  if (options.timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("mpi: timeout must be > 0");
  // Without mpirun MPI would start a single-rank job: say what is wrong instead.
  const char* launched = std::getenv("OMPI_COMM_WORLD_SIZE");
  const int expected_world = options.members.empty() ? options.size : -1;
  if (launched == nullptr && expected_world != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("collective mpi: worker ", options.rank, " was not started by mpirun; the ", options.size,
                     " workers must be the ranks of one `mpirun -np ", options.size, "` (pstrain-launch does that)"));
  }
  PSTRAIN_RETURN_IF_ERROR(InitializeMpi());
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (options.members.empty()) {
    if (world_size != options.size || world_rank != options.rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "collective mpi: this process is MPI rank ", world_rank, " of ", world_size, " but worker ", options.rank,
          " of ", options.size, ": start the workers with `mpirun -np ", options.size, "`, worker i as rank i"));
    }
    return std::unique_ptr<Collective>(new MpiCollective(options, MPI_COMM_WORLD, world_rank));
  }
  // A subgroup: its members (world ranks = worker indices) create it.
  MPI_Group world_group, group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Group_incl(world_group, static_cast<int>(options.members.size()), options.members.data(), &group);
  MPI_Comm comm = MPI_COMM_NULL;
  const int code = MPI_Comm_create_group(MPI_COMM_WORLD, group, /*tag=*/0, &comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  if (code != MPI_SUCCESS || comm == MPI_COMM_NULL) {
    return absl::UnavailableError(absl::StrCat("mpi: cannot create the communicator \"", options.prefix, "\" on rank ",
                                               world_rank, ": ", MpiError(code)));
  }
  return std::unique_ptr<Collective>(new MpiCollective(options, comm, world_rank));
}

const bool kRegistered = CollectiveRegistry().Register(
    "mpi", {.host_buffers = true, .needs_store = false, .launched_by_mpirun = true, .create = CreateMpiCollective});

}  // namespace
}  // namespace pstrain
