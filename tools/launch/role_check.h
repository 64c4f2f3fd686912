// Asking a role binary whether it accepts the config, before anything starts.
//
// pstrain-ps and pstrain-worker take --check_config: they validate the config
// exactly as they would at start-up (with the cluster and index they are
// given), print "config ok: ..." and exit 0, or print "error: <message>" and
// exit 2, starting nothing. The launcher runs each distinct role binary once
// that way, with the arguments it will run with, and starts the cluster only
// when every one accepts.
#ifndef PSTRAIN_TOOLS_LAUNCH_ROLE_CHECK_H_
#define PSTRAIN_TOOLS_LAUNCH_ROLE_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain::launch {

// The flag that puts a role binary in check mode.
inline constexpr char kCheckConfigFlag[] = "--check_config";
// A worker's "needs: mpirun": the workers must be the ranks of one mpirun.
inline constexpr char kNeedsMpirun[] = "mpirun";

// How a check command ended.
struct CheckRun {
  bool timed_out = false;  // killed (with its process group) at the deadline
  int wait_status = 0;     // as from waitpid(), when !timed_out
  std::string output;      // stdout and stderr together (at most the last 64 KiB)
};

// Runs `binary` (execv, no PATH search) with `args` as argv[1..], stdin on
// /dev/null, stdout and stderr captured, in its own process group, killed
// with SIGKILL (the whole group) if it has not exited after `timeout`, and
// if the caller dies (PR_SET_PDEATHSIG). Errors: FailedPrecondition
// "cannot execute <binary>: ..." when it is not executable; Internal when a
// pipe or fork fails.
absl::StatusOr<CheckRun> RunCheckCommand(const std::string& binary, const std::vector<std::string>& args,
                                         absl::Duration timeout);

// The role's own message from its check output: the text after "error: " on
// the last line that starts so, else the last non-empty line, else "".
std::string CheckMessage(const std::string& output);

// The "needs: <what>" lines of a check's output (e.g. "mpirun": the workers
// must be the ranks of one mpirun), in order.
std::vector<std::string> CheckNeeds(const std::string& output);

// Runs the check (`args` must already hold kCheckConfigFlag) and turns its
// end into the launcher's verdict, `role` ("ps", "worker") naming the binary:
//   exit 0                -> what the role needs to be launched (CheckNeeds)
//   exit 2                -> InvalidArgument "<role> refuses the config: <message>"
//   the deadline passed   -> DeadlineExceeded "<role> did not finish checking the config within <timeout> (...)"
//   another exit, signal  -> Internal "<role> failed while checking the config (<binary> exited with ...): <message>"
//   not executable        -> FailedPrecondition (RunCheckCommand's)
absl::StatusOr<std::vector<std::string>> CheckRoleConfig(const std::string& role, const std::string& binary,
                                                         const std::vector<std::string>& args, absl::Duration timeout);

// One role binary to check: `kind` ("ps", "worker") names it in messages;
// `args` hold kCheckConfigFlag.
struct RoleToCheck {
  std::string kind;
  std::string binary;
  std::vector<std::string> args;
};

// What the checks of every role binary said.
struct RoleChecks {
  std::vector<std::string> accepted_by;  // the kinds that accepted the config, in order
  bool workers_need_mpirun = false;      // the worker binary said "needs: mpirun" (kNeedsMpirun)
};

// CheckRoleConfig for each of `roles` in order, each within `timeout`; the
// first refusal or failure stops the rest and is returned with its code,
// "; nothing was started" appended to its message.
absl::StatusOr<RoleChecks> CheckRoles(const std::vector<RoleToCheck>& roles, absl::Duration timeout);

}  // namespace pstrain::launch

#endif  // PSTRAIN_TOOLS_LAUNCH_ROLE_CHECK_H_
