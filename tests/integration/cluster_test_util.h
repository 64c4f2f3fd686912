// Shared pieces of the integration tests: configs written to temp dirs,
// free loopback ports, finding role processes by their command line.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace pstrain::test {

// "127.0.0.1:p1,127.0.0.1:p2,..." for n free loopback ports.
std::string FreeLoopbackHosts(int n);

// The n-th entry of a comma-separated host list.
std::string NthHost(const std::string& hosts, int n);

// Pids of live processes whose command line contains every one of `needles`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles);

// Path of a file in the source tree (e.g. "configs/x.yaml").
std::string SourcePath(const std::string& relative);

}  // namespace pstrain::test
