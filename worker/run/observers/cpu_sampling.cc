#include "worker/run/observers/cpu_sampling.h"

namespace pstrain {

void CpuSampling::OnStepStart(int64_t step) {
  if (!at_warmup_ && step >= warmup_steps_) at_warmup_ = SampleCpu();
}

void CpuSampling::AddToReport(WorkerReport* report) const { report->set_cpu_cores(UsageSoFar().process_cores); }

CpuUsage CpuSampling::UsageSoFar() const { return at_warmup_ ? UsageBetween(*at_warmup_, SampleCpu()) : CpuUsage{}; }

}  // namespace pstrain
