// CpuSampling: the CPU this worker process used over its measured steps
// (from the first step at or after warm-up to the end of the run), for its
// report's cpu_cores and, on the chief of an emulated run, the verdict on
// whether this machine kept up (worker/emulation_report.h).
#pragma once

#include <optional>

#include "common/metrics/cpu_usage.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

class CpuSampling : public StepObserver {
 public:
  explicit CpuSampling(int64_t warmup_steps) : warmup_steps_(warmup_steps) {}

  void OnStepStart(int64_t step) override;
  // cpu_cores (0 when no step after warm-up ran).
  void AddToReport(WorkerReport* report) const override;

  // The process's and the machine's CPU use from the first measured step
  // until now; zeros when none ran.
  CpuUsage UsageSoFar() const;

 private:
  const int64_t warmup_steps_;
  std::optional<CpuSample> at_warmup_;
};

}  // namespace pstrain
