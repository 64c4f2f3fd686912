// Which CPUs each emulated host's processes may run on.
//
// Separate machines do not share cores. Emulated hosts on one machine do,
// unless they are given CPUs of their own: then one host's copies, wake-ups
// and thread switches cannot take another host's cycles, and a process's
// threads stay on its host's cores as they would on its own machine
// (docs/BENCHMARKS.md, "Emulated hosts on CPUs of their own").
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::launch {

// The CPUs this process may run on (sched_getaffinity), ascending.
std::vector<int> CpusOfThisProcess();

// `cpus` split into `hosts` disjoint runs of consecutive entries, as equal as
// possible (the first hosts get one more when it does not divide).
// FailedPrecondition, naming both counts, when there are fewer CPUs than
// hosts; InvalidArgument for hosts < 1.
absl::StatusOr<std::vector<std::vector<int>>> SplitCpus(int hosts, const std::vector<int>& cpus);

// `cpus` in the list syntax of taskset(1) and cpusets: "0-3,6" (ascending
// runs; empty for none).
std::string CpuListString(const std::vector<int>& cpus);

}  // namespace pstrain::launch
