// Supervising the processes of a one-machine cluster.
//
// ClusterProcesses starts each role in its own process group with stdin on
// /dev/null and stdout+stderr on one pipe, copies the raw bytes to
// <log_dir>/<role>.log, and echoes each line prefixed with "[<role>] " to
// `out_fd`. Its own messages go to the same stream, one line each, starting
// with "launch: ". Lines are written whole, so output from different roles
// never interleaves within a line; a final line without '\n' is terminated when
// the role's pipe closes (and over-long lines are split at 64 KiB).
//
// Policy (see Wait()):
//   - every role exits 0 (PS roles may exit before or after the workers)
//     -> exit code 0;
//   - a role that exits non-zero (other than 2) or dies from a signal while
//     workers still run is started again, with the same arguments, up to
//     `max_restarts` times per role (said on the output, with both pids);
//   - with workers_may_leave, a worker that fails past its restarts is
//     left out (said), and the others go on;
//   - the first role to exit non-zero or die from a signal (past its
//     restarts) -> every remaining
//     process group gets SIGTERM, SIGKILL after `grace`, exit code 1; exit code
//     2 when that first failure was exit code 2 (a role rejected the config)
//     while training was still running;
//   - all workers exited 0 but a PS is still running `grace` later -> teardown,
//     exit code 1;
//   - `timeout` expires -> teardown, exit code 1, naming the roles still
//   running;
//   - a signal number arrives on `interrupt_fd` -> teardown, exit code
//     128 + signal (a second one while stopping skips straight to SIGKILL).
// A role's process group never outlives its leader: when a role exits, any
// process left in its group is sent SIGKILL.
//
// Children get PR_SET_PDEATHSIG(SIGKILL), so they die with the launcher even if
// it is SIGKILLed. Linux ties this to the *thread* that forked: call Start()
// from a thread that lives as long as the cluster (the main thread in the
// launcher).
//
// Not thread-safe; one object supervises one cluster, once. Single-threaded:
// Wait() polls the pipes and `interrupt_fd`, and checks for exited children
// every 100 ms.
#ifndef PSTRAIN_TOOLS_LAUNCH_PROCESS_GROUP_H_
#define PSTRAIN_TOOLS_LAUNCH_PROCESS_GROUP_H_

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace pstrain::launch {

// One process to start.
struct RoleSpec {
  std::string name;               // "ps0", "worker1": output prefix and log file stem
  bool is_ps = false;             // PS roles are expected to exit once the workers have
  std::string binary;             // executable path, run with execv (no PATH search)
  std::vector<std::string> args;  // argv[1..]; argv[0] is `binary`
  // An mpirun of this many worker ranks (mpirun.h): its --tag-output lines
  // are echoed per rank, "[worker<rank>] <line>" (tagged_output.h). 0: none.
  int ranks = 0;
};

struct ClusterOptions {
  // Directory (must exist) for <name>.log raw logs; empty: no log files.
  std::string log_dir;
  // Where prefixed role lines and "launch: " messages go. Writing to a closed
  // pipe raises SIGPIPE unless the caller ignores it (the launcher does); after
  // EPIPE, output to out_fd stops but the log files are still written.
  int out_fd = STDOUT_FILENO;
  // SIGTERM -> SIGKILL delay, and how long PS roles may outlive the workers.
  absl::Duration grace = absl::Seconds(5);
  // Overall deadline counted from Start(); zero or negative: none.
  absl::Duration timeout = absl::ZeroDuration();
  // Read end of a signal self-pipe (or -1): every byte read from it is a signal
  // number asking for teardown. It should be non-blocking.
  int interrupt_fd = -1;
  // Times each role is started again after it failed (see the policy).
  int max_restarts = 0;
  // A worker that fails past its restarts leaves the run instead of ending
  // it (elastic.on_worker_lost continue): said on the output, and the run
  // goes on with the others.
  bool workers_may_leave = false;
};

// How one role ended.
struct RoleExit {
  std::string name;
  pid_t pid = -1;
  int wait_status = 0;  // as from waitpid() (its last process's)
  int restarts = 0;     // times it was started again
};

// "code 3" or "signal 9 (Killed)" for a waitpid() status.
std::string DescribeWaitStatus(int wait_status);

struct ClusterOutcome {
  int exit_code = 0;            // see the policy above
  std::string reason;           // one line; empty on success
  std::vector<RoleExit> exits;  // every started role, in start order
};

class ClusterProcesses {
 public:
  explicit ClusterProcesses(ClusterOptions options);
  // Sends SIGKILL to the process group of every role still running and reaps
  // it.
  ~ClusterProcesses();
  ClusterProcesses(const ClusterProcesses&) = delete;
  ClusterProcesses& operator=(const ClusterProcesses&) = delete;

  // Starts every role, in order. Fails (nothing left running) if a name is
  // empty or repeated, a binary is not executable, a log file cannot be
  // created, or fork fails. Call at most once.
  absl::Status Start(const std::vector<RoleSpec>& roles);

  // Supervises the roles until all have been reaped and their output has been
  // copied, applying the policy above. Call once, after a successful Start().
  ClusterOutcome Wait();

  // Process ids (= process group ids) of the roles, in start order (a
  // restarted role's newest).
  std::vector<pid_t> pids() const;

 private:
  struct Role;
  enum class Phase { kRunning, kWaitingForPs, kStopping, kKilling };
  using Clock = std::chrono::steady_clock;

  // Forks and execs `role` (again, after a restart) with a fresh pipe.
  absl::Status Spawn(Role& role);
  void Say(const std::string& message);
  void WriteOut(const std::string& text);
  bool ReadFromRole(Role& role);  // false once the pipe is closed
  void EmitLine(Role& role, absl::string_view line);
  void ClosePipe(Role& role);
  void ReapExited();
  void OnRoleExit(Role& role);
  // A worker finished or left: once every worker has, the PS roles get
  // `grace` to follow.
  void OnWorkerLeft();
  void OnInterrupt(int signo);
  void CheckDeadlines(Clock::time_point now);
  void BeginTeardown(int exit_code, const std::string& reason);
  void KillAll(int signo);
  bool AllReaped() const;
  std::string RunningRoles() const;
  void KillAndReapAll();

  ClusterOptions options_;
  std::vector<std::unique_ptr<Role>> roles_;
  Phase phase_ = Phase::kRunning;
  ClusterOutcome outcome_;
  bool outcome_set_ = false;
  bool out_broken_ = false;
  Clock::time_point start_time_;
  Clock::time_point phase_deadline_;  // for kWaitingForPs and kStopping
};

}  // namespace pstrain::launch

#endif  // PSTRAIN_TOOLS_LAUNCH_PROCESS_GROUP_H_
