// TrainingSummaries: the chief's TensorBoard event file (config
// `summaries:`, common/summary/event_writer.h): train/loss,
// train/images_per_sec_chief (this worker's rate over the step) and
// train/learning_rate (the schedule at that global step) every
// `every_steps` steps; eval/test_accuracy and eval/test_loss after every
// evaluation (periodic ones and the final one). A write that fails is logged once and the run goes on. A step
// observer of the chief (worker/run/observers/step_observer.h).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/summary/event_writer.h"
#include "optim/lr_schedule.h"
#include "proto/config.pb.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

class TrainingSummaries : public StepObserver {
 public:
  // Null when the config asks for none. Errors name summaries.dir when the
  // file cannot be created. `examples_per_step`: the chief's (batch x devices).
  static absl::StatusOr<std::unique_ptr<TrainingSummaries>> Create(const ExperimentConfig& config, int64_t total_steps,
                                                                   int64_t examples_per_step);

  void OnStepEnd(const StepOutcome& outcome) override;
  void OnEvaluation(const Evaluation& evaluation) override;
  const std::string& path() const { return writer_->path(); }

 private:
  TrainingSummaries(std::unique_ptr<tb::EventFileWriter> writer, LearningRateSchedule schedule, int64_t every,
                    int64_t examples_per_step)
      : writer_(std::move(writer)), schedule_(std::move(schedule)), every_(every), examples_(examples_per_step) {}
  void Record(int64_t step, const std::vector<tb::TaggedScalar>& scalars);

  std::unique_ptr<tb::EventFileWriter> writer_;
  LearningRateSchedule schedule_;
  int64_t every_;
  int64_t examples_;
  bool failed_ = false;
};

}  // namespace pstrain
