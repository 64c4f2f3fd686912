#include "tests/integration/cluster_test_util.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"
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

std::vector<pid_t> FindProcesses(const std::vector<std::string>& needles) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string cmdline = buffer.str();
    for (char& c : cmdline) {
      if (c == '\0') c = ' ';
    }
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string stat_line;
    std::getline(stat, stat_line);
    const size_t paren = stat_line.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat_line.size() && stat_line[paren + 2] == 'Z') continue;
    bool all = !cmdline.empty();
    for (const std::string& needle : needles) all = all && cmdline.find(needle) != std::string::npos;
    if (all) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

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
