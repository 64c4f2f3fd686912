// Starting the workers as the ranks of one mpirun: how pstrain-launch runs an
// experiment whose collective is mpi (the workers' --check_config says
// "needs: mpirun"). Each rank takes its worker index from its MPI rank
// (OMPI_COMM_WORLD_RANK; common/config/cluster.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/launch/process_group.h"

namespace pstrain::launch {

// The role that runs `worker_binary args...` as `workers` ranks:
//   mpirun -np <workers> --oversubscribe --bind-to none --tag-output
//          [--allow-run-as-root] <worker_binary> <args...>
// (oversubscribed and unbound: the ranks share this machine's cores with
// the PS roles; --allow-run-as-root when the launcher runs as root, as in a
// container). mpirun is $PSTRAIN_MPIRUN when set, else the first mpirun on
// PATH; FailedPrecondition naming the remedy when there is none.
absl::StatusOr<RoleSpec> MpirunRole(int workers, const std::string& worker_binary, std::vector<std::string> args);

}  // namespace pstrain::launch
