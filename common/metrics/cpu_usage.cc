#include "common/metrics/cpu_usage.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

#include "absl/time/clock.h"

namespace pstrain {

double ProcessCpuSeconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec * 1e-6;
}

CpuSample SampleCpu() {
  CpuSample sample;
  sample.wall = absl::Now();
  sample.process_cpu_seconds = ProcessCpuSeconds();
  // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
  std::ifstream stat("/proc/stat");
  std::string label;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> label >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && label == "cpu") {
    // guest time is already part of user time.
    sample.machine_busy_ticks = user + nice + system + irq + softirq + steal;
    sample.machine_total_ticks = sample.machine_busy_ticks + idle + iowait;
  }
  return sample;
}

CpuUsage UsageBetween(const CpuSample& from, const CpuSample& to) {
  CpuUsage usage;
  const double wall = absl::ToDoubleSeconds(to.wall - from.wall);
  if (wall > 0) usage.process_cores = (to.process_cpu_seconds - from.process_cpu_seconds) / wall;
  if (to.machine_total_ticks > from.machine_total_ticks && from.machine_total_ticks > 0) {
    usage.machine_busy = static_cast<double>(to.machine_busy_ticks - from.machine_busy_ticks) /
                         static_cast<double>(to.machine_total_ticks - from.machine_total_ticks);
  }
  return usage;
}

}  // namespace pstrain
