// Helpers for tests that start real processes: temp dirs, files,
// subprocesses, liveness.
#ifndef PSTRAIN_TESTS_UTIL_PROCESS_TEST_UTIL_H_
#define PSTRAIN_TESTS_UTIL_PROCESS_TEST_UTIL_H_

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain::test {

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pstrain_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void WriteExecutable(const std::string& path, const std::string& text) {
  WriteFile(path, text);
  ASSERT_EQ(chmod(path.c_str(), 0755), 0) << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// Polls `done` every 20 ms until it holds or `limit` passes.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// The state letter from /proc/<pid>/stat, or 0 if there is no such process.
inline char ProcessState(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

// True while `pid` exists and is not a zombie (an orphaned zombie is dead; its
// reaping is up to init).
inline bool ProcessAlive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  const char state = ProcessState(pid);
  return state != 0 && state != 'Z';
}

// Live (non-zombie) processes whose process group is `pgid`.
inline std::vector<pid_t> LiveGroupMembers(pid_t pgid) {
  std::vector<pid_t> members;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return members;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    const std::string stat = ReadFile(std::string("/proc/") + entry->d_name + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 2));
    char state = 0;
    long ppid = 0, pgrp = 0;
    fields >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z') members.push_back(static_cast<pid_t>(pid));
  }
  closedir(dir);
  return members;
}

// Reads the pid a fake role wrote to `path`; -1 if there is none yet.
inline pid_t ReadPid(const std::string& path) {
  const std::string text = ReadFile(path);
  return text.empty() ? -1 : static_cast<pid_t>(std::atol(text.c_str()));
}

// A subprocess with stdout and stderr captured in files.
struct Subprocess {
  pid_t pid = -1;
  std::string stdout_path;
  std::string stderr_path;
  std::string out() const { return ReadFile(stdout_path); }
  std::string err() const { return ReadFile(stderr_path); }
};

// Starts `argv` (argv[0] is the executable path) in `cwd` with the current
// environment; output goes to <capture_dir>/{stdout,stderr}. The child is
// killed when the test process ends (PR_SET_PDEATHSIG), so a test that
// fails, or is stopped by ctest's timeout, before it waits for its roles
// leaves none running beside the next test (or its own second run).
inline Subprocess Spawn(const std::vector<std::string>& argv, const std::string& capture_dir,
                        const std::string& cwd = "") {
  Subprocess proc;
  proc.stdout_path = capture_dir + "/stdout";
  proc.stderr_path = capture_dir + "/stderr";
  std::vector<std::string> args = argv;
  std::vector<char*> c_argv;
  for (std::string& a : args) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  const int out = open(proc.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(proc.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t parent = getpid();
  proc.pid = fork();
  if (proc.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);  // the test died before prctl took effect
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  close(out);
  close(err);
  return proc;
}

// Waits for `pid` up to `limit`; returns its wait status, or nullopt after
// killing it with SIGKILL when it did not exit in time.
inline std::optional<int> WaitForExit(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  int status = 0;
  const bool exited = WaitUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, limit);
  if (exited) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

// The directory holding the pstrain executables: $PSTRAIN_BIN_DIR (set by
// ctest), else the directory of the running test binary (also build/bin).
inline std::string BinDir() {
  if (const char* dir = std::getenv("PSTRAIN_BIN_DIR"); dir != nullptr && *dir != '\0') return dir;
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

}  // namespace pstrain::test

#endif  // PSTRAIN_TESTS_UTIL_PROCESS_TEST_UTIL_H_
