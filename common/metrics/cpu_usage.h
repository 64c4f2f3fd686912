// How busy the CPUs were between two moments: this process's CPU time
// (getrusage) and the whole machine's (/proc/stat, every core), against wall
// time. Emulated runs use it to tell whether this machine kept up
// (docs/EMULATION.md, "Valid or CPU-bound").
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace pstrain {

struct CpuSample {
  absl::Time wall;
  double process_cpu_seconds = 0;  // user + system of every thread of this process
  // /proc/stat's first line, in clock ticks; both 0 where it cannot be read.
  uint64_t machine_busy_ticks = 0;
  uint64_t machine_total_ticks = 0;
};

CpuSample SampleCpu();
// This process's CPU seconds so far (user + system, every thread): the
// process half of SampleCpu, without reading /proc/stat. 0 if unknown.
double ProcessCpuSeconds();

struct CpuUsage {
  // This process's CPU seconds per wall second: cores kept busy.
  double process_cores = 0;
  // Share of the machine's CPU time (every core) that was busy, in [0, 1];
  // -1 when /proc/stat could not be read.
  double machine_busy = -1;
};

// The usage between two samples (`from` taken first).
CpuUsage UsageBetween(const CpuSample& from, const CpuSample& to);

}  // namespace pstrain
