// Finding a cluster's role processes by their command line (/proc), for the
// tools and tests that signal them (pstrain-storm's faults).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pstrain::launch {

// Pids of live (not zombie) processes whose command line (arguments joined
// by spaces) contains every one of `needles`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles);

}  // namespace pstrain::launch
