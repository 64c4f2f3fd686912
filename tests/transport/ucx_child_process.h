// Child processes of the transport tests: the test binary started again
// with PSTRAIN_UCX_CHILD naming one of its child tests (UcxChild.<name>
// unless told another suite; they skip otherwise), reporting to the parent
// one line at a time through a pipe on descriptor kChildFd. A child may be started through a command prefix
// (`ip netns exec <namespace>`: on an emulated host).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"

extern char** environ;

namespace pstrain::testing_util {

inline constexpr char kChildEnv[] = "PSTRAIN_UCX_CHILD";
inline constexpr int kChildFd = 99;

// In a child: whether this process is the child running UcxChild.<name>.
inline bool IsChild(const std::string& name) {
  const char* value = std::getenv(kChildEnv);
  return value != nullptr && name == value;
}

// In a child: one line to the parent.
inline void TellParent(const std::string& line) {
  const std::string text = line + "\n";
  ASSERT_EQ(write(kChildFd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

// The environment variable `name`, or "" when unset (a child's part).
inline std::string EnvValue(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// In a child: serves `handler` over `transport` at `address`, tells the
// parent the port it got, and serves until killed (two minutes at most).
inline void ServeForParent(Transport& transport, Handler& handler, const std::string& address) {
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve(address, &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  TellParent(absl::StrCat((*server)->port()));
  absl::SleepFor(absl::Minutes(2));
}

// This binary again, running <suite>.<test> with `env` added, started
// through `prefix` (a command and its arguments that run the rest; empty:
// directly). Killed (SIGKILL) when destroyed.
class ChildProcess {
 public:
  ChildProcess(const std::string& test, const std::vector<std::string>& env,
               const std::vector<std::string>& prefix = {}, const std::string& suite = "UcxChild") {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], kChildFd);
    // The binary's own path: through a prefix, /proc/self/exe would name the prefix's.
    char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const std::string exe = n > 0 ? std::string(self, n) : "/proc/self/exe";
    std::vector<std::string> args = prefix;
    args.push_back(exe);
    args.push_back(absl::StrCat("--gtest_filter=", suite, ".", test));
    // Ours first: getenv finds the first of duplicate names.
    std::vector<std::string> vars = env;
    vars.push_back(absl::StrCat(kChildEnv, "=", test));
    for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& v : vars) envp.push_back(v.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, args[0].c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    from_child_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (from_child_ >= 0) close(from_child_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // The next line the child writes; nullopt at EOF or after `timeout`.
  std::optional<std::string> ReadLine(absl::Duration timeout = absl::Seconds(60)) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      pollfd fd{from_child_, POLLIN, 0};
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
      if (ms <= 0 || poll(&fd, 1, ms) <= 0) return std::nullopt;
      char chunk[256];
      const ssize_t n = read(from_child_, chunk, sizeof(chunk));
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, n);
    }
  }

  void Kill() { kill(pid_, SIGKILL); }

  // Waits for the child to exit; its wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Waits at most `timeout` for the child to exit: its wait status, or
  // nullopt (the child keeps running) when it did not.
  std::optional<int> WaitFor(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return status;
      }
      if (done < 0 || absl::Now() >= deadline) return std::nullopt;
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

 private:
  pid_t pid_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

}  // namespace pstrain::testing_util
