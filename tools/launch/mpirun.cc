#include "tools/launch/mpirun.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pstrain::launch {
namespace {

// An executable `name` in a directory of $PATH, or "".
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

absl::StatusOr<RoleSpec> MpirunRole(int workers, const std::string& worker_binary, std::vector<std::string> args) {
  if (workers < 1) return absl::InvalidArgumentError(absl::StrCat("mpirun: ", workers, " workers"));
  const char* chosen = std::getenv("PSTRAIN_MPIRUN");
  const std::string mpirun = chosen != nullptr && *chosen != '\0' ? chosen : FindOnPath("mpirun");
  if (mpirun.empty() || access(mpirun.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the workers use collective mpi and must be started by mpirun, but ",
                     mpirun.empty() ? "no mpirun is on PATH" : absl::StrCat(mpirun, " is not executable"),
                     " (install openmpi-bin, or set PSTRAIN_MPIRUN)"));
  }
  // Open MPI derives its prefix from the path it runs as; through a link
  // such as the merged-/usr /bin/mpirun it would be "/", which it refuses.
  char resolved[PATH_MAX];
  RoleSpec role;
  role.name = "workers";
  role.ranks = workers;
  role.binary = realpath(mpirun.c_str(), resolved) != nullptr ? std::string(resolved) : mpirun;
  role.args = {"-np", absl::StrCat(workers), "--oversubscribe", "--bind-to", "none", "--tag-output"};
  if (geteuid() == 0) role.args.push_back("--allow-run-as-root");
  role.args.push_back(worker_binary);
  role.args.insert(role.args.end(), args.begin(), args.end());
  return role;
}

}  // namespace pstrain::launch
