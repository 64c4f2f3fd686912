// TrainingSummaries: the chief's TensorBoard event file (config
// `summaries:`, common/summary/event_writer.h): train/loss,
// train/images_per_sec_chief (this worker's rate over the step) and
// train/learning_rate (the schedule at that global step) every
// `every_steps` steps; eval/test_accuracy and eval/test_loss after the final
// evaluation. A write that fails is logged once and the run goes on.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/summary/event_writer.h"
#include "optim/lr_schedule.h"
#include "proto/config.pb.h"

namespace pstrain {

class TrainingSummaries {
 public:
  // Null when the config asks for none. Errors name summaries.dir when the
  // file cannot be created.
  static absl::StatusOr<std::unique_ptr<TrainingSummaries>> Create(const ExperimentConfig& config, int64_t total_steps);

  // After step `step` (0-based) trained `examples` examples in `seconds`.
  void OnStep(int64_t step, double loss, int64_t examples, double seconds);
  void OnEvaluation(int64_t step, double accuracy, double loss);
  const std::string& path() const { return writer_->path(); }

 private:
  TrainingSummaries(std::unique_ptr<tb::EventFileWriter> writer, LearningRateSchedule schedule, int64_t every)
      : writer_(std::move(writer)), schedule_(std::move(schedule)), every_(every) {}
  void Record(int64_t step, const std::vector<tb::TaggedScalar>& scalars);

  std::unique_ptr<tb::EventFileWriter> writer_;
  LearningRateSchedule schedule_;
  int64_t every_;
  bool failed_ = false;
};

}  // namespace pstrain
