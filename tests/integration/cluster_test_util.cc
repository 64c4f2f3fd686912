#include "tests/integration/cluster_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
#include "tools/launch/find_processes.h"
#include "tools/launch/free_ports.h"

namespace pstrain::test {

std::string FreeLoopbackHosts(int n) {
  absl::StatusOr<std::vector<int>> ports = launch::PickFreeLoopbackPorts(n);
  CHECK(ports.ok()) << ports.status();
  std::vector<std::string> hosts;
  for (int p : *ports) hosts.push_back(absl::StrCat("127.0.0.1:", p));
  return absl::StrJoin(hosts, ",");
}

std::string NthHost(const std::string& hosts, int n) {
  std::vector<std::string> parts = absl::StrSplit(hosts, ',');
  return parts.at(n);
}

std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles) { return launch::FindProcesses(needles); }

std::string SourcePath(const std::string& relative) {
  const char* dir = std::getenv("PSTRAIN_SOURCE_DIR");
  return absl::StrCat(dir != nullptr ? dir : PSTRAIN_TEST_SOURCE_DIR, "/", relative);
}

std::string WithOverrides(const std::string& yaml, const std::string& overrides) {
  std::vector<std::string> lines = absl::StrSplit(yaml, '\n');
  for (absl::string_view line : absl::StrSplit(overrides, '\n', absl::SkipEmpty())) {
    const std::string key(line.substr(0, line.find(':') + 1));
    auto it = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return absl::StartsWith(l, key); });
    if (it != lines.end()) {
      *it = std::string(line);
    } else {
      lines.emplace_back(line);
    }
  }
  return absl::StrJoin(lines, "\n") + "\n";
}

}  // namespace pstrain::test
