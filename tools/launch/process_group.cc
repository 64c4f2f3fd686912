#include "tools/launch/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/launch/child_exec.h"
#include "tools/launch/tagged_output.h"

namespace pstrain::launch {
namespace {

constexpr size_t kMaxLineBytes = 64 * 1024;
constexpr auto kReapTick = std::chrono::milliseconds(100);
// How long output is still copied from a pipe once every role has been reaped
// (only matters if something outside the roles' groups holds a pipe open).
constexpr auto kDrainLimit = std::chrono::seconds(1);

std::string SignalName(int sig) {
  const char* name = sigabbrev_np(sig);
  return name ? absl::StrCat("SIG", name) : absl::StrCat("signal ", sig);
}

bool ExitedOk(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0; }

}  // namespace

std::string DescribeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("code ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* what = strsignal(sig);
    return absl::StrCat("signal ", sig, " (", what ? what : "?", ")");
  }
  return absl::StrCat("wait status ", wait_status);
}

struct ClusterProcesses::Role {
  RoleSpec spec;
  std::string prefix;  // "[name] "
  pid_t pid = -1;
  int pipe_fd = -1;  // read end of the child's stdout+stderr; -1 once closed
  int log_fd = -1;
  std::string partial;                   // bytes of an unfinished line
  std::unique_ptr<TaggedOutput> tagged;  // an mpirun's ranks (spec.ranks > 0)
  bool reaped = false;
  int wait_status = 0;
  int restarts = 0;  // times this role was started again after failing
};

ClusterProcesses::ClusterProcesses(ClusterOptions options) : options_(std::move(options)) {}

ClusterProcesses::~ClusterProcesses() {
  KillAndReapAll();
  for (auto& role : roles_) {
    if (role->pipe_fd >= 0) close(role->pipe_fd);
    if (role->log_fd >= 0) close(role->log_fd);
  }
}

std::vector<pid_t> ClusterProcesses::pids() const {
  std::vector<pid_t> pids;
  for (const auto& role : roles_) pids.push_back(role->pid);
  return pids;
}

absl::Status ClusterProcesses::Start(const std::vector<RoleSpec>& specs) {
  if (!roles_.empty()) return absl::FailedPreconditionError("ClusterProcesses::Start called twice");
  std::set<std::string> names;
  for (const RoleSpec& spec : specs) {
    if (spec.name.empty() || !names.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("role name '", spec.name, "' is empty or repeated"));
    }
    if (access(spec.binary.c_str(), X_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot execute ", spec.binary, " (for ", spec.name, "): ", std::strerror(errno)));
    }
  }
  // Everything that can fail without side effects happens before the first
  // fork.
  for (const RoleSpec& spec : specs) {
    auto role = std::make_unique<Role>();
    role->spec = spec;
    role->prefix = absl::StrCat("[", spec.name, "] ");
    if (spec.ranks > 0) role->tagged = std::make_unique<TaggedOutput>("worker");
    if (!options_.log_dir.empty()) {
      const std::string path = absl::StrCat(options_.log_dir, "/", spec.name, ".log");
      role->log_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (role->log_fd < 0) {
        const absl::Status error =
            absl::FailedPreconditionError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
        roles_.clear();  // no children yet; the logs already opened leak nothing
        return error;
      }
    }
    roles_.push_back(std::move(role));
  }
  start_time_ = Clock::now();
  for (auto& role : roles_) {
    if (absl::Status status = Spawn(*role); !status.ok()) {
      KillAndReapAll();
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterProcesses::Spawn(Role& role) {
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) return absl::InternalError(absl::StrCat("open /dev/null: ", std::strerror(errno)));
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    close(null_fd);
    return absl::InternalError(absl::StrCat("pipe for ", role.spec.name, ": ", std::strerror(errno)));
  }
  std::vector<char*> argv;
  argv.push_back(role.spec.binary.data());
  for (std::string& arg : role.spec.args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // Signals stay blocked across fork so that none runs the launcher's
  // handler in the child before the child resets the handlers.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(argv[0], argv.data(), fds[1], null_fd, parent);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(fds[1]);
  close(null_fd);
  if (pid < 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("fork for ", role.spec.name, ": ", std::strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  role.pid = pid;
  role.pipe_fd = fds[0];
  role.reaped = false;
  role.wait_status = 0;
  fcntl(role.pipe_fd, F_SETFL, fcntl(role.pipe_fd, F_GETFL) | O_NONBLOCK);
  return absl::OkStatus();
}

void ClusterProcesses::WriteOut(const std::string& text) {
  size_t done = 0;
  while (!out_broken_ && done < text.size()) {
    const ssize_t n = write(options_.out_fd, text.data() + done, text.size() - done);
    if (n > 0) {
      done += n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{options_.out_fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      out_broken_ = true;
    }
  }
}

void ClusterProcesses::Say(const std::string& message) { WriteOut(absl::StrCat("launch: ", message, "\n")); }

void ClusterProcesses::EmitLine(Role& role, absl::string_view line) { WriteOut(absl::StrCat(role.prefix, line, "\n")); }

bool ClusterProcesses::ReadFromRole(Role& role) {
  char buf[16384];
  while (role.pipe_fd >= 0) {
    const ssize_t n = read(role.pipe_fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {  // EOF or a read error: either way nothing more will come
      ClosePipe(role);
      return false;
    }
    if (role.log_fd >= 0) {
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = write(role.log_fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;  // a full disk loses log bytes, not the run
        done += w;
      }
    }
    if (role.tagged != nullptr) {  // each rank's whole lines, under its own name
      WriteOut(role.tagged->Feed(absl::string_view(buf, n)));
      continue;
    }
    // Whole lines go out together, in one write per read. A line longer than
    // kMaxLineBytes goes out in pieces of exactly kMaxLineBytes, however the
    // pipe happened to chunk it.
    std::string out;
    absl::string_view data(buf, n);
    while (!data.empty()) {
      const size_t nl = data.find('\n');
      const bool complete = nl != absl::string_view::npos;
      role.partial.append(data.data(), complete ? nl : data.size());
      data.remove_prefix(complete ? nl + 1 : data.size());
      // Cut pieces while more of the line is known to follow them.
      size_t cut = 0;
      while (role.partial.size() - cut > kMaxLineBytes) {
        absl::StrAppend(&out, role.prefix, absl::string_view(role.partial).substr(cut, kMaxLineBytes), "\n");
        cut += kMaxLineBytes;
      }
      role.partial.erase(0, cut);
      if (!complete) break;
      absl::StrAppend(&out, role.prefix, role.partial, "\n");
      role.partial.clear();
    }
    WriteOut(out);
  }
  return false;
}

void ClusterProcesses::ClosePipe(Role& role) {
  if (role.pipe_fd < 0) return;
  close(role.pipe_fd);
  role.pipe_fd = -1;
  if (role.tagged != nullptr) WriteOut(role.tagged->Flush());
  if (!role.partial.empty()) {
    EmitLine(role, role.partial);
    role.partial.clear();
  }
}

bool ClusterProcesses::AllReaped() const {
  return std::all_of(roles_.begin(), roles_.end(), [](const auto& r) { return r->reaped; });
}

std::string ClusterProcesses::RunningRoles() const {
  std::vector<std::string> names;
  for (const auto& role : roles_) {
    if (!role->reaped) names.push_back(role->spec.name);
  }
  return absl::StrJoin(names, ", ");
}

void ClusterProcesses::ReapExited() {
  for (auto& role : roles_) {
    if (role->reaped) continue;
    int status = 0;
    const pid_t r = waitpid(role->pid, &status, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR)) continue;
    role->reaped = true;
    role->wait_status = r == role->pid ? status : 0;
    // Whatever else is left in the group goes too; that also closes the pipe.
    kill(-role->pid, SIGKILL);
    ReadFromRole(*role);  // its last words come before the verdict
    OnRoleExit(*role);
  }
}

void ClusterProcesses::OnWorkerLeft() {
  if (AllReaped()) return;  // Wait() reports success
  const bool workers_done =
      std::all_of(roles_.begin(), roles_.end(), [](const auto& r) { return r->spec.is_ps || r->reaped; });
  if (phase_ == Phase::kRunning && workers_done) {
    phase_ = Phase::kWaitingForPs;
    phase_deadline_ = Clock::now() + absl::ToChronoNanoseconds(options_.grace);
  }
}

void ClusterProcesses::OnRoleExit(Role& role) {
  const std::string& name = role.spec.name;
  const std::string how = DescribeWaitStatus(role.wait_status);
  const bool ok = ExitedOk(role.wait_status);
  const std::string verb = WIFSIGNALED(role.wait_status) ? "was killed by " : "exited with ";
  switch (phase_) {
    case Phase::kRunning:
    case Phase::kWaitingForPs: {
      if (!ok) {
        const bool config_error = WIFEXITED(role.wait_status) && WEXITSTATUS(role.wait_status) == 2;
        const int code = phase_ == Phase::kRunning && config_error ? 2 : 1;
        const std::string reason = absl::StrCat(name, " ", verb, how);
        // A role that refused the config would refuse it again; a PS that
        // fails after every worker finished has nobody left to serve.
        if (phase_ == Phase::kRunning && !config_error && role.restarts < options_.max_restarts) {
          ++role.restarts;
          ClosePipe(role);
          const pid_t old_pid = role.pid;
          const absl::Status status = Spawn(role);
          if (status.ok()) {
            Say(absl::StrCat(reason, "; restarted it (restart ", role.restarts, " of ", options_.max_restarts, ", pid ",
                             old_pid, " -> ", role.pid, ")"));
            return;
          }
          Say(absl::StrCat(reason, "; cannot restart it: ", status.message(), "; stopping all roles"));
          BeginTeardown(code, reason);
          return;
        }
        if (phase_ == Phase::kRunning && !config_error && !role.spec.is_ps && options_.workers_may_leave) {
          Say(absl::StrCat(reason, "; the run goes on without it (elastic.on_worker_lost continue)"));
          OnWorkerLeft();
          return;
        }
        if (options_.max_restarts > 0) {
          Say(absl::StrCat(reason, " after ", role.restarts, " restart", role.restarts == 1 ? "" : "s",
                           " (--max_restarts ", options_.max_restarts, "); stopping all roles"));
          BeginTeardown(code, reason);
          return;
        }
        Say(absl::StrCat(reason, "; stopping all roles"));
        BeginTeardown(code, reason);
        return;
      }
      Say(absl::StrCat(name, " finished"));
      OnWorkerLeft();
      return;
    }
    case Phase::kStopping:
    case Phase::kKilling:
      Say(absl::StrCat(name, " ", verb, how));
      return;
  }
}

void ClusterProcesses::BeginTeardown(int exit_code, const std::string& reason) {
  if (!outcome_set_) {
    outcome_.exit_code = exit_code;
    outcome_.reason = reason;
    outcome_set_ = true;
  }
  phase_ = Phase::kStopping;
  phase_deadline_ = Clock::now() + absl::ToChronoNanoseconds(options_.grace);
  KillAll(SIGTERM);
}

void ClusterProcesses::KillAll(int signo) {
  for (auto& role : roles_) {
    if (!role->reaped) kill(-role->pid, signo);
  }
}

void ClusterProcesses::OnInterrupt(int signo) {
  const std::string name = SignalName(signo);
  if (phase_ == Phase::kStopping || phase_ == Phase::kKilling) {
    if (phase_ == Phase::kStopping && !AllReaped()) {
      Say(absl::StrCat("received ", name, " while stopping; killing ", RunningRoles()));
      phase_ = Phase::kKilling;
      KillAll(SIGKILL);
    }
    return;
  }
  const std::string reason = absl::StrCat("received ", name);
  Say(absl::StrCat(reason, "; stopping all roles"));
  BeginTeardown(128 + signo, reason);
}

void ClusterProcesses::CheckDeadlines(Clock::time_point now) {
  if (AllReaped()) return;
  const bool has_timeout = options_.timeout > absl::ZeroDuration();
  if ((phase_ == Phase::kRunning || phase_ == Phase::kWaitingForPs) && has_timeout &&
      now >= start_time_ + absl::ToChronoNanoseconds(options_.timeout)) {
    const std::string reason =
        absl::StrCat("timed out after ", absl::FormatDuration(options_.timeout), "; still running: ", RunningRoles());
    Say(absl::StrCat(reason, "; stopping all roles"));
    BeginTeardown(1, reason);
    return;
  }
  if (phase_ == Phase::kWaitingForPs && now >= phase_deadline_) {
    const std::string reason = absl::StrCat("all workers finished but ", RunningRoles(), " still running ",
                                            absl::FormatDuration(options_.grace), " later");
    Say(absl::StrCat(reason, "; stopping it"));
    BeginTeardown(1, reason);
    return;
  }
  if (phase_ == Phase::kStopping && now >= phase_deadline_) {
    Say(absl::StrCat(RunningRoles(), " still running ", absl::FormatDuration(options_.grace),
                     " after SIGTERM; sending SIGKILL"));
    phase_ = Phase::kKilling;
    KillAll(SIGKILL);
  }
}

ClusterOutcome ClusterProcesses::Wait() {
  std::optional<Clock::time_point> drain_deadline;
  while (true) {
    ReapExited();
    const Clock::time_point now = Clock::now();
    CheckDeadlines(now);
    const bool pipes_open = std::any_of(roles_.begin(), roles_.end(), [](const auto& r) { return r->pipe_fd >= 0; });
    if (AllReaped()) {
      if (!pipes_open) break;
      if (!drain_deadline) drain_deadline = now + kDrainLimit;
      if (now >= *drain_deadline) {
        for (auto& role : roles_) ClosePipe(*role);
        break;
      }
    }

    // Sleep until output, a signal, the next reap tick or the next deadline.
    auto wake = now + kReapTick;
    if (phase_ == Phase::kWaitingForPs || phase_ == Phase::kStopping) wake = std::min(wake, phase_deadline_);
    if (options_.timeout > absl::ZeroDuration() && phase_ != Phase::kStopping && phase_ != Phase::kKilling) {
      wake = std::min(wake, start_time_ + absl::ToChronoNanoseconds(options_.timeout));
    }
    if (drain_deadline) wake = std::min(wake, *drain_deadline);
    const int timeout_ms = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));

    std::vector<pollfd> fds;
    std::vector<Role*> fd_roles;
    if (options_.interrupt_fd >= 0) fds.push_back({options_.interrupt_fd, POLLIN, 0});
    for (auto& role : roles_) {
      if (role->pipe_fd < 0) continue;
      fds.push_back({role->pipe_fd, POLLIN, 0});
      fd_roles.push_back(role.get());
    }
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready <= 0) continue;  // timeout or EINTR

    size_t i = 0;
    if (options_.interrupt_fd >= 0) {
      if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
        unsigned char signals[64];
        const ssize_t n = read(options_.interrupt_fd, signals, sizeof(signals));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) options_.interrupt_fd = -1;
        for (ssize_t k = 0; k < n; ++k) OnInterrupt(signals[k]);
      }
      i = 1;
    }
    for (size_t k = 0; k < fd_roles.size(); ++k) {
      if (fds[i + k].revents & (POLLIN | POLLHUP | POLLERR)) ReadFromRole(*fd_roles[k]);
    }
  }

  outcome_.exits.clear();
  for (const auto& role : roles_)
    outcome_.exits.push_back({role->spec.name, role->pid, role->wait_status, role->restarts});
  if (!outcome_set_) {
    outcome_.exit_code = 0;
    outcome_.reason.clear();
  }
  return outcome_;
}

void ClusterProcesses::KillAndReapAll() {
  for (auto& role : roles_) {
    if (role->pid <= 0 || role->reaped) continue;
    kill(-role->pid, SIGKILL);
    int status = 0;
    while (waitpid(role->pid, &status, 0) < 0 && errno == EINTR) {
    }
    role->reaped = true;
    role->wait_status = status;
  }
}

}  // namespace pstrain::launch
