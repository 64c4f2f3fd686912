// TrainingRun: one worker's whole run, as stages:
//
//   Create          set up: the input pipeline (worker/run/input_pipeline.h),
//                   replicas (emulated devices wrapped), the strategy, the
//                   timeline, and the step
//                   observers (worker/run/observers/) the config asks for
//   Run:
//     Start         the chief initialises the variables; the strategy starts
//                   (parameter servers: Init, or restore from a checkpoint;
//                   others join); the banner
//     StepLoop      per step: observers' OnStepStart, the strategy's
//                   BeforeStep, forward/backward on every replica, AfterStep,
//                   observers' OnStepEnd; a failed step is recovered by the
//                   strategy (a restarted peer) and training goes on from
//                   where it says
//     Finish        the worker's report (observers add their figures), the
//                   strategy's exchange of reports; the chief then evaluates
//                   the final parameters and writes result.json
//
// What watches steps is an observer; the loop itself only trains.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/results.pb.h"
#include "worker/replica_set.h"
#include "worker/run/input_pipeline.h"
#include "worker/run/observers/step_observer.h"
#include "worker/run/trainer.h"
#include "worker/sparse_stage.h"
#include "worker/strategy.h"
#include "worker/timeline.h"

namespace pstrain {

class CpuSampling;
class LearningCheck;
class ProgressLines;
class TrainingTime;

class TrainingRun {
 public:
  static absl::StatusOr<std::unique_ptr<TrainingRun>> Create(const ExperimentConfig& config, int worker_index,
                                                             Transport* transport, const WorkerRunOptions& options);
  ~TrainingRun();

  // Start, StepLoop, Finish. Call once.
  absl::StatusOr<RunResult> Run();

 private:
  TrainingRun(const ExperimentConfig& config, int worker_index, Transport* transport, const WorkerRunOptions& options);

  // ---- set-up (Create)
  absl::Status LoadData();
  absl::Status CreateReplicas();
  absl::Status CreateStrategy();
  absl::Status AddObservers();

  // ---- the run
  absl::Status Start();
  absl::Status StepLoop();
  // Sparse models: pulls the rows of the step's examples (every replica's).
  absl::Status PullSparseRows(int64_t step);
  // Replica r's model input: its batch, or what the sparse stage composed.
  const Tensor& ModelInput(int r);
  // One step. A failed BeforeStep or AfterStep is the outcome's status (the
  // strategy recovers from it); a diverged loss ends the run (the error).
  absl::StatusOr<StepOutcome> RunStep(int64_t step);
  // Evaluates replica 0's values on the test set after `steps_done` steps,
  // prints the line and tells every observer.
  Evaluation Evaluate(int64_t steps_done);
  WorkerReport Report() const;
  void PrintSummary(const WorkerReport& report) const;
  absl::StatusOr<RunResult> Finish(const WorkerReport& report, const ClusterReport& cluster);
  void ExportFinalParameters();
  // Whether the strategy's shards compare the workers' pace
  // (ShardSession::watches_stragglers).
  bool WatchesStragglers() { return strategy_->shards() != nullptr && strategy_->shards()->watches_stragglers(); }

  // The config as given, its layout's byte sizes scaled with the variables
  // (WithScaledLayoutBytes: --byte_scale).
  const ExperimentConfig config_;
  const int worker_index_;
  const bool chief_;
  const int devices_;
  const bool emulated_;
  // The chief evaluates (an emulated device computes no accuracy).
  const bool evaluate_;
  Transport* const transport_;
  const WorkerRunOptions options_;
  const absl::Time start_;

  StrategyNeeds needs_;
  std::unique_ptr<InputPipeline> input_;
  absl::Duration input_wait_;         // the steps' waits for their batch
  double device_images_per_sec_ = 0;  // emulated devices: one device's rate
  std::unique_ptr<ReplicaSet> replicas_;
  int64_t total_steps_ = 0;
  std::unique_ptr<Timeline> timeline_;
  std::unique_ptr<Strategy> strategy_;
  // Sparse models (model.tables): the embedding half of each step; null
  // otherwise. composed_[r]: replica r's model input it composed.
  std::unique_ptr<SparseStage> sparse_;
  std::vector<Tensor> composed_;
  std::optional<Evaluation> final_evaluation_;  // made while the shards were up
  // The first step this worker trains (Strategy::Start says it).
  int64_t start_step_ = 0;
  // Steps this worker trained, and their examples.
  int64_t steps_run_ = 0;
  int64_t examples_ = 0;

  std::vector<std::unique_ptr<StepObserver>> observers_;
  ProgressLines* progress_ = nullptr;      // among observers_
  CpuSampling* cpu_ = nullptr;             // among observers_
  TrainingTime* training_time_ = nullptr;  // among observers_
  LearningCheck* learning_ = nullptr;      // among observers_; null when off

  // Per replica: the strategy's hook as the observers wrapped it.
  std::vector<GradientReadyHook> hooks_;
};

}  // namespace pstrain
