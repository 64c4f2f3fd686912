#include "tools/launch/host_cpus.h"

#include <sched.h>

#include "absl/strings/str_cat.h"

namespace pstrain::launch {

std::vector<int> CpusOfThisProcess() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

absl::StatusOr<std::vector<std::vector<int>>> SplitCpus(int hosts, const std::vector<int>& cpus) {
  if (hosts < 1) return absl::InvalidArgumentError(absl::StrCat("cannot split CPUs among ", hosts, " hosts"));
  const int n = static_cast<int>(cpus.size());
  if (n < hosts) {
    return absl::FailedPreconditionError(
        absl::StrCat(hosts, " emulated hosts cannot have CPUs of their own on ", n, " CPUs"));
  }
  std::vector<std::vector<int>> split(hosts);
  int next = 0;
  for (int h = 0; h < hosts; ++h) {
    const int count = n / hosts + (h < n % hosts ? 1 : 0);
    split[h].assign(cpus.begin() + next, cpus.begin() + next + count);
    next += count;
  }
  return split;
}

std::string CpuListString(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t last = i;
    while (last + 1 < cpus.size() && cpus[last + 1] == cpus[last] + 1) ++last;
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, cpus[i]);
    if (last > i) absl::StrAppend(&out, "-", cpus[last]);
    i = last + 1;
  }
  return out;
}

}  // namespace pstrain::launch
