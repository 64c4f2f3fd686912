#include "worker/run/observers/progress_lines.h"

namespace pstrain {

ProgressLines::ProgressLines(int64_t examples_per_step, int64_t warmup_steps, int64_t display_every,
                             int64_t total_steps, double time_scale, std::ostream& out)
    : throughput_(examples_per_step, warmup_steps),
      display_every_(display_every),
      total_steps_(total_steps),
      time_scale_(time_scale),
      out_(out) {}

void ProgressLines::OnStepEnd(const StepOutcome& outcome) {
  if (!outcome.ok()) return;
  throughput_.RecordStep(outcome.step, outcome.seconds());
  recent_losses_.push_back(outcome.loss);
  if (first_losses_.size() < kFinalLossSteps) first_losses_.push_back(outcome.loss);
  if (recent_losses_.size() > kFinalLossSteps) recent_losses_.pop_front();
  const int64_t done = outcome.step + 1;
  if (done % display_every_ == 0 || done == total_steps_) {
    out_ << throughput_.ProgressLine(outcome.step, outcome.loss) << std::endl;
  }
}

void ProgressLines::AddToReport(WorkerReport* report) const {
  report->set_images_per_sec(throughput_.mean_images_per_sec() * time_scale_);
  report->set_images_per_sec_stddev(throughput_.stddev() * time_scale_);
  auto mean = [](const auto& losses) {
    double sum = 0;
    for (float l : losses) sum += l;
    return losses.empty() ? 0.0 : sum / losses.size();
  };
  report->set_initial_loss(mean(first_losses_));
  report->set_final_loss(mean(recent_losses_));
}

}  // namespace pstrain
