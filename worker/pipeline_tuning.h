// PipelineTuning: the layout tuner (worker/layout_tuner.h) at work on one
// worker's pipeline (worker/ps_pipeline.h). It times each step's cycle (from
// one step's start to the next's: compute, waits and communication), feeds
// the tuner, and when the tuner picks another setting applies it at the
// start of the next step: it waits for the pulls in flight, re-batches the
// client and sets the window. Each change goes to the log, the timeline
// (lane "tuning") and the worker's report (result.json's
// workers[].layout_tuning).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
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
  // null) outlive this.
  static std::unique_ptr<PipelineTuning> Create(const ExperimentConfig& config, PsPipeline* pipeline,
                                                Timeline* timeline, int worker_index);

  // At the start of `step`, before PsPipeline::BeginStep and with the
  // previous step's pushes acknowledged. When a new setting applies from
  // this step, returns the version of the values WaitForPulls found (the
  // caller's pulled version); nullopt otherwise; a failed wait's error.
  absl::StatusOr<std::optional<int64_t>> BeforeStep(int64_t step);

  // The decisions so far and where the search stands.
  LayoutTuning Record() const;

 private:
  PipelineTuning(const LayoutTuner::Options& options, PsPipeline* pipeline, Timeline* timeline, int worker_index,
                 double time_scale)
      : tuner_(options), pipeline_(pipeline), timeline_(timeline), worker_(worker_index), time_scale_(time_scale) {}

  LayoutTuner tuner_;
  PsPipeline* const pipeline_;
  Timeline* const timeline_;
  const int worker_;
  const double time_scale_;  // wall seconds per second of the run's own time
  absl::Time first_start_ = absl::InfinitePast();
  absl::Time last_start_ = absl::InfinitePast();
  std::vector<double> decision_seconds_;  // run_seconds of each of the tuner's decisions
};

}  // namespace pstrain
