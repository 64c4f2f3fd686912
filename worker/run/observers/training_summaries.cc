#include "worker/run/observers/training_summaries.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TrainingSummaries>> TrainingSummaries::Create(const ExperimentConfig& config,
                                                                             int64_t total_steps,
                                                                             int64_t examples_per_step) {
  const SummaryConfig& c = config.summaries();
  if (c.dir().empty()) return std::unique_ptr<TrainingSummaries>();
  PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                           LearningRateSchedule::Create(config.optimizer(), total_steps));
  absl::StatusOr<std::unique_ptr<tb::EventFileWriter>> writer = tb::EventFileWriter::Create(c.dir(), "chief");
  if (!writer.ok())
    return absl::Status(writer.status().code(), absl::StrCat("summaries.dir: ", writer.status().message()));
  LOG(INFO) << "summaries: " << (*writer)->path();
  return std::unique_ptr<TrainingSummaries>(
      new TrainingSummaries(*std::move(writer), std::move(schedule), c.every_steps(), examples_per_step));
}

void TrainingSummaries::OnStepEnd(const StepOutcome& outcome) {
  const int64_t step = outcome.step;
  const double seconds = outcome.seconds();
  if (!outcome.ok() || (step + 1) % every_ != 0) return;
  // A sync global step is one update; the schedule is evaluated where the
  // PS evaluates it for this step's update.
  Record(step + 1, {{"train/loss", outcome.loss},
                    {"train/images_per_sec_chief", seconds > 0 ? examples_ / seconds : 0.0},
                    {"train/learning_rate", schedule_.At(step)}});
}

void TrainingSummaries::OnEvaluation(const Evaluation& evaluation) {
  std::vector<tb::TaggedScalar> scalars = {{"eval/test_accuracy", evaluation.accuracy()},
                                           {"eval/test_loss", evaluation.result.mean_loss}};
  if (!std::isnan(evaluation.result.auc)) {
    scalars.push_back({"eval/test_auc", evaluation.result.auc});
    scalars.push_back({"eval/test_log_loss", evaluation.result.log_loss});
  }
  Record(evaluation.step, scalars);
  if (absl::Status s = writer_->Flush(); !s.ok() && !failed_) LOG(WARNING) << "summaries: " << s.message();
}

void TrainingSummaries::Record(int64_t step, const std::vector<tb::TaggedScalar>& scalars) {
  absl::Status s = writer_->AddScalars(step, scalars);
  if (!s.ok() && !failed_) {
    failed_ = true;
    LOG(WARNING) << "summaries: " << s.message() << " (the run goes on without them)";
  }
}

}  // namespace pstrain
