#include "worker/emulation_report.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_format.h"
#include "common/config/byte_scale.h"
#include "common/config/time_dilation.h"

namespace pstrain {

Emulation EmulationRecord(const ExperimentConfig& config, const RunResult& result, double device_images_per_sec,
                          double machine_busy, double byte_scale) {
  const EmulationConfig& e = config.emulation();
  Emulation record;
  const double k = TimeDilation(config);
  record.set_time_scale(k);
  record.set_byte_scale(ByteScale(config, byte_scale));
  record.set_link_gbps(e.link_gbps());
  const int workers = config.cluster().worker_hosts_size();
  const int worker_hosts = (workers + e.workers_per_host() - 1) / e.workers_per_host();
  record.set_hosts(worker_hosts + (e.ps_placement() == EmulationConfig::separate ? config.cluster().ps_hosts_size()
                                                                                 : e.server_hosts()));
  record.set_machine_cpu_busy(machine_busy);
  int busiest = -1;
  for (const WorkerReport& w : result.workers()) {
    if (busiest < 0 || w.cpu_cores() > record.max_worker_cpu_cores()) {
      record.set_max_worker_cpu_cores(w.cpu_cores());
      busiest = w.worker();
    }
  }
  if (device_images_per_sec <= 0) return record;  // real devices: their own pace is the point
  record.set_device_images_per_sec(device_images_per_sec);
  const double devices = static_cast<double>(workers) * config.devices_per_worker();
  record.set_scaling_efficiency(result.images_per_sec() / (devices * device_images_per_sec));
  std::string reason;
  double over = 0;  // the larger excess over the target share
  if (machine_busy > kCpuBoundMachineShare) {
    reason = absl::StrFormat("this machine's CPUs were %.0f%% busy over the measured steps (limit %.0f%%)",
                             100 * machine_busy, 100 * kCpuBoundMachineShare);
    over = machine_busy / (kCpuBoundMachineShare / 2);
  }
  if (record.max_worker_cpu_cores() > kCpuBoundWorkerCores) {
    if (!reason.empty()) reason += "; ";
    reason += absl::StrFormat("worker %d kept %.2f cores busy (limit %.2f)", busiest, record.max_worker_cpu_cores(),
                              kCpuBoundWorkerCores);
    over = std::max(over, record.max_worker_cpu_cores() / (kCpuBoundWorkerCores / 2));
  }
  if (!reason.empty()) {
    record.set_cpu_bound(true);
    record.set_cpu_bound_reason(reason);
    // CPU work per step stays the same while dilated time grows with k.
    record.set_suggested_time_scale(std::ceil(k * over));
  }
  return record;
}

}  // namespace pstrain
