// LearningCheck: names a run that does not learn, so a silently broken
// setting (a learning rate of 0, shuffled labels, inputs the model cannot
// use) reads as a warning, not as a row like any other.
//
// After `train.learning_check_steps` steps of this run (shorter runs, and
// runs on data.source synthetic's random labels, are not judged), the mean
// training loss of the last quarter of those steps (at most 50) is
// compared with
//   - the loss of a model at chance: ln(num_classes) (a uniform guess) and,
//     where the training labels are known up front, the entropy of their
//     class shares (a guess of the class prior: a click model's click
//     rate); within 1% of either is "at chance";
//   - runs from step 0 only (not restored ones): the mean over the first
//     quarter; a loss that
//     did not fall by 1% "has not fallen".
// A flagged run prints one WARNING line among the progress lines, reports
// the warning (WorkerReport.warnings, so result.json's `warnings`), sets the
// gauge pstrain_worker_not_learning{worker} to 1 and, with
// train.stop_if_not_learning, asks the training loop to stop (stop()).
// A loss that is not finite already ends the run (TrainingRun::RunStep).
//
// TestAtChance judges an evaluation the same way: accuracy within 2 points
// of the best a constant guess gets (1 / classes, or the most common test
// label's share where known), or a two-class AUC within 0.02 of 0.5.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/telemetry/metric_registry.h"
#include "worker/run/observers/step_observer.h"

namespace pstrain {

// What a model that learned nothing scores on a dataset.
struct Chance {
  int num_classes = 0;
  double uniform_loss = 0;  // ln(num_classes)
  // The entropy of the class shares of the labels held in memory; NaN when
  // the labels are decoded batch by batch (encoded datasets).
  double prior_loss = 0;
  // The most common label's share (a constant guess's accuracy), else 1 / classes.
  double best_constant_accuracy = 0;
  bool random_labels = false;  // nothing to learn (Dataset::random_labels)
};
Chance ChanceOf(const Dataset& data);

// A warning when `evaluation` is at chance for `test`'s labels (see above).
std::optional<std::string> TestAtChance(const Evaluation& evaluation, const Chance& test);

class LearningCheck : public StepObserver {
 public:
  struct Options {
    int64_t check_steps = 200;  // train.learning_check_steps, > 0
    int64_t total_steps = 0;    // the run's last step + 1 (an upper bound with dynamic sharding)
    bool stop = false;          // train.stop_if_not_learning
    int worker = 0;
  };
  // The gauge goes on `registry` when given (null: no metric).
  static absl::StatusOr<std::unique_ptr<LearningCheck>> Create(const Options& options, const Chance& train,
                                                               MetricRegistry* registry, std::ostream& out);

  void OnStepEnd(const StepOutcome& outcome) override;
  void AddToReport(WorkerReport* report) const override;

  // The warning, once the check flagged the run.
  const std::optional<std::string>& warning() const { return warning_; }
  // True once flagged with train.stop_if_not_learning.
  bool stop() const { return options_.stop && warning_.has_value(); }

 private:
  LearningCheck(const Options& options, const Chance& chance, Gauge* gauge, std::ostream& out);
  // The verdict on the losses of steps [first_step_, step], or nullopt.
  std::optional<std::string> Judge(int64_t step) const;

  const Options options_;
  const Chance chance_;
  Gauge* const gauge_;
  std::ostream& out_;
  // Set at the first step seen (a restored run starts after step 0): the
  // run's first step, the step judged (-1: never) and the window's length.
  int64_t first_step_ = -1;
  int64_t check_at_ = -1;
  size_t window_ = 1;
  std::vector<float> losses_;  // of the steps up to check_at_
  bool judged_ = false;
  std::optional<std::string> warning_;
};

}  // namespace pstrain
