// `pstrain-bench allreduce --backend mpi`, inside each rank of the mpirun:
// the plain MPI_Allreduce of the installed Open MPI beside the strategy's
// path over the mpi collective (allreduce_bench.h).
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/allreduce_bench.h"

#ifdef PSTRAIN_WITH_MPI
#include <mpi.h>
#endif

namespace pstrain {

absl::StatusOr<AllReduceBenchResult> RunMpiAllReduceRank(const AllReduceBenchOptions& options) {
  if (absl::Status s = ValidateAllReduceBenchOptions(options); !s.ok()) return s;
#ifndef PSTRAIN_WITH_MPI
  return absl::FailedPreconditionError("this pstrain-bench was built without Open MPI (PSTRAIN_WITH_MPI=OFF)");
#else
  int rank = -1, size = 0;
  const char* env_rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* env_size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (env_rank == nullptr || env_size == nullptr || !absl::SimpleAtoi(env_rank, &rank) ||
      !absl::SimpleAtoi(env_size, &size) || size != options.ranks) {
    return absl::FailedPreconditionError(
        absl::StrCat("allreduce bench over mpi: run as the ranks of `mpirun -np ", options.ranks, "`"));
  }
  absl::StatusOr<CollectiveEntry> mpi = CollectiveRegistry().Find("mpi");
  if (!mpi.ok()) return mpi.status();
  CollectiveOptions c;
  c.rank = rank;
  c.size = size;
  c.prefix = "allreduce_bench";
  c.timeout = absl::Seconds(120);
  absl::StatusOr<std::unique_ptr<Collective> > collective = mpi->create(c);  // initialises MPI
  if (!collective.ok()) return collective.status();
  absl::StatusOr<RankSeconds> mine = TimeRank(
      collective->get(),
      [](float* data, size_t count) {
        const int code = MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        return code == MPI_SUCCESS ? absl::OkStatus() : absl::UnavailableError("MPI_Allreduce failed");
      },
      options);
  if (!mine.ok()) return mine.status();
  double loops[2] = {mine->reference, mine->strategy};
  MPI_Allreduce(MPI_IN_PLACE, loops, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the slowest rank's
  RankSeconds slowest = *mine;
  slowest.reference = loops[0];
  slowest.strategy = loops[1];
  return MakeResult(options, slowest, /*memcpy_gbytes_per_sec=*/0, /*memcpy_buffer_bytes=*/0);
#endif
}

}  // namespace pstrain
