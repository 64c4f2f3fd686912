// PipelineTuning: the layout tuner (worker/layout_tuner.h) at work on one
// worker's pipeline (worker/ps_pipeline.h). It times each step's cycle (from
// one step's start to the next's: compute, waits and communication) and the
// CPU time this process spent in it, feeds the tuner, and when the tuner picks another setting applies it at the
// start of the next step: it waits for the pulls in flight, re-batches the
// client and sets the window. Each change goes to the log, the timeline
// (lane "tuning") and the worker's report (result.json's
// workers[].layout_tuning).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "worker/layout_tuner.h"
#include "worker/ps_pipeline.h"
#include "worker/timeline.h"

namespace pstrain {

// Whether `config` tunes: with the pipeline, ps_scheduling.tune when set,
// else unless the config sets batch_bytes, window_bytes or pushes_per_shard.
bool TuningOn(const ExperimentConfig& config);

class PipelineTuning {
 public:
  // Null when `config` does not tune. `pipeline` and `timeline` (may be
  // null) outlive this. The chief (worker 0) leads: its tuner measures the
  // cluster's steps and chooses; every other worker follows, applying the
  // chief's layout as its heartbeats bring it (one layout for the cluster:
  // sync steps are every worker's, so one measurement suffices, and two
  // tuners would confound each other's trials). The chief's trials start
  // counting two heartbeat periods after a change, once followers run it.
  static std::unique_ptr<PipelineTuning> Create(const ExperimentConfig& config, PsPipeline* pipeline,
                                                Timeline* timeline, int worker_index);

  // At the start of `step`, before PsPipeline::BeforeStep and with the
  // previous step's pushes acknowledged. When a new setting applies from
  // this step (the chief: its tuner's; a follower: the chief's, heard since
  // its last step), returns the version of the values WaitForPulls found
  // (the caller's pulled version); nullopt otherwise; a failed wait's error.
  absl::StatusOr<std::optional<int64_t>> BeforeStep(int64_t step);

  // The chief: its layout for the heartbeats (nullopt before its first
  // change, and on followers). Any thread.
  std::optional<ChiefLayout> Published() const ABSL_LOCKS_EXCLUDED(mu_);
  // A follower: the chief's layout as a heartbeat's answer brought it
  // (kept when newer than what it heard before; the chief ignores it). Any
  // thread.
  void Heard(const ChiefLayout& layout) ABSL_LOCKS_EXCLUDED(mu_);

  // The decisions so far (a follower's: the chief's it applied) and where
  // the search stands (a follower never settles: the chief's record says).
  LayoutTuning Record() const;

 private:
  PipelineTuning(const LayoutTuner::Options& options, bool leads, PsPipeline* pipeline, Timeline* timeline,
                 int worker_index, double time_scale);

  // The chief: the tuner's decision after a step of `seconds` that took
  // `cpu_seconds` of this process's CPU, published.
  std::optional<TuningDecision> Decide(int64_t step, double seconds, double cpu_seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // A follower: the chief's layout heard since the last step, if any.
  std::optional<TuningDecision> Follow(int64_t step, double seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the pulls in flight and re-lays the pipeline out; logs and
  // records it on the timeline.
  absl::StatusOr<int64_t> Apply(int64_t step, const TuningDecision& decision, absl::Time start);

  std::unique_ptr<LayoutTuner> tuner_;  // the chief's; null on followers
  PsPipeline* const pipeline_;
  Timeline* const timeline_;
  const int worker_;
  const double time_scale_;  // wall seconds per second of the run's own time
  absl::Time first_start_ = absl::InfinitePast();
  absl::Time last_start_ = absl::InfinitePast();
  double last_cpu_ = 0;                   // this process's CPU seconds at last_start_
  std::vector<double> decision_seconds_;  // run_seconds of each decision
  // A follower's: the chief's layouts it applied, and the current one.
  std::vector<TuningDecision> followed_;
  TransferLayout current_;
  int64_t applied_version_ = 0;
  mutable absl::Mutex mu_;
  ChiefLayout published_ ABSL_GUARDED_BY(mu_);  // the chief's
  ChiefLayout heard_ ABSL_GUARDED_BY(mu_);      // a follower's
};

}  // namespace pstrain
