#include "tools/launch/child_exec.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>

namespace pstrain::launch {

[[noreturn]] void ExecChild(const char* path, char* const argv[], int out_fd, int null_fd, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The parent may have died before prctl took effect; then nobody supervises
  // us.
  if (getppid() != parent) _exit(127);
  dup2(null_fd, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  // Handlers are reset by exec, but ignored signals (the launcher ignores
  // SIGPIPE) and the mask (blocked around fork) are inherited: restore both.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(path, argv);
  const char msg[] = "launch: exec failed: ";
  (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
  (void)!write(STDERR_FILENO, path, strlen(path));
  (void)!write(STDERR_FILENO, "\n", 1);
  _exit(127);
}

}  // namespace pstrain::launch
