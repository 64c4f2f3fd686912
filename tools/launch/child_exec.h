// What a launcher child does between fork() and exec(): the one place for
// it, shared by the roles (process_group.h) and the config checks
// (role_check.h).
#pragma once

#include <sys/types.h>

namespace pstrain::launch {

// Makes the child its own process group, asks for SIGKILL when `parent` (the
// launcher) dies (exiting at once if it already has), puts stdin on `null_fd`
// and stdout and stderr on `out_fd`, restores default signal handling and an
// empty mask (ignored signals and the mask survive exec), then execs `path`
// with `argv`. On failure writes "launch: exec failed: <path>" and exits 127.
// Async-signal-safe calls only: it runs in a child of a threaded process.
[[noreturn]] void ExecChild(const char* path, char* const argv[], int out_fd, int null_fd, pid_t parent);

}  // namespace pstrain::launch
