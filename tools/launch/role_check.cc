#include "tools/launch/role_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/launch/child_exec.h"
#include "tools/launch/process_group.h"

namespace pstrain::launch {
namespace {

constexpr size_t kMaxOutputBytes = 64 * 1024;
constexpr int kPollMillis = 20;

// Appends what can be read from `fd` now; false once it is closed (EOF or error).
bool ReadAvailable(int fd, std::string* out) {
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      out->append(buffer, static_cast<size_t>(n));
      if (out->size() > kMaxOutputBytes) out->erase(0, out->size() - kMaxOutputBytes);
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

std::string Seconds(absl::Duration d) { return absl::StrCat(absl::ToDoubleSeconds(d), "s"); }

}  // namespace

absl::StatusOr<CheckRun> RunCheckCommand(const std::string& binary, const std::vector<std::string>& args,
                                         absl::Duration timeout) {
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot execute ", binary, ": ", std::strerror(errno)));
  }
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int open_errno = errno;
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(absl::StrCat("open /dev/null: ", std::strerror(open_errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(argv[0], argv.data(), fds[1], null_fd, parent);
  const int fork_errno = errno;
  close(fds[1]);
  close(null_fd);
  if (pid < 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("fork for ", binary, ": ", std::strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);

  CheckRun run;
  const auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(timeout);
  bool pipe_open = true;
  bool exited = false;
  while (!exited) {
    if (pipe_open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, kPollMillis) > 0) pipe_open = ReadAvailable(fds[0], &run.output);
    } else {
      usleep(kPollMillis * 1000);
    }
    const pid_t r = waitpid(pid, &run.wait_status, WNOHANG);
    if (r < 0 && errno != EINTR) {
      const int wait_errno = errno;
      kill(-pid, SIGKILL);
      close(fds[0]);
      return absl::InternalError(absl::StrCat("waitpid for ", binary, ": ", std::strerror(wait_errno)));
    }
    if (r == pid) {
      exited = true;
    } else if (std::chrono::steady_clock::now() >= deadline) {
      run.timed_out = true;
      kill(-pid, SIGKILL);
      while (waitpid(pid, &run.wait_status, 0) < 0 && errno == EINTR) {
      }
      exited = true;
    }
  }
  // Whatever the role wrote before it exited; nothing it left behind lives on.
  if (pipe_open) ReadAvailable(fds[0], &run.output);
  kill(-pid, SIGKILL);
  close(fds[0]);
  return run;
}

std::string CheckMessage(const std::string& output) {
  std::string last;
  std::string error;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    last = std::string(line);
    if (absl::ConsumePrefix(&line, "error: ")) error = std::string(line);
  }
  return error.empty() ? last : error;
}

std::vector<std::string> CheckNeeds(const std::string& output) {
  std::vector<std::string> needs;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "needs: ")) needs.emplace_back(absl::StripAsciiWhitespace(line));
  }
  return needs;
}

absl::StatusOr<std::vector<std::string>> CheckRoleConfig(const std::string& role, const std::string& binary,
                                                         const std::vector<std::string>& args, absl::Duration timeout) {
  absl::StatusOr<CheckRun> run = RunCheckCommand(binary, args, timeout);
  if (!run.ok()) return run.status();
  const std::string message = CheckMessage(run->output);
  if (run->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(role, " did not finish checking the config within ",
                                                    Seconds(timeout), " (", binary, " ", kCheckConfigFlag,
                                                    "); it was killed"));
  }
  const int status = run->wait_status;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return CheckNeeds(run->output);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " refuses the config: ", message.empty() ? "(it exited with code 2 and no message)" : message));
  }
  return absl::InternalError(absl::StrCat(role, " failed while checking the config (", binary, " ", kCheckConfigFlag,
                                          " ", WIFSIGNALED(status) ? "was killed by " : "exited with ",
                                          DescribeWaitStatus(status), ")",
                                          message.empty() ? "" : absl::StrCat(": ", message)));
}

absl::StatusOr<RoleChecks> CheckRoles(const std::vector<RoleToCheck>& roles, absl::Duration timeout) {
  RoleChecks checks;
  for (const RoleToCheck& role : roles) {
    const absl::StatusOr<std::vector<std::string>> needs = CheckRoleConfig(role.kind, role.binary, role.args, timeout);
    if (!needs.ok()) {
      return absl::Status(needs.status().code(), absl::StrCat(needs.status().message(), "; nothing was started"));
    }
    checks.accepted_by.push_back(role.kind);
    for (const std::string& need : *needs) {
      if (need == kNeedsMpirun && role.kind == "worker") checks.workers_need_mpirun = true;
    }
  }
  return checks;
}

}  // namespace pstrain::launch
