// What pstrain-launch tells the user on stdout, one "launch: " line each:
// the plan before any role starts, and the summary of a successful run.
#pragma once

#include <string>

#include "proto/config.pb.h"
#include "tools/launch/launch_plan.h"
#include "tools/launch/process_group.h"

namespace pstrain::launch {

// How many PS and workers from which config into which run directory, which
// role binaries accepted the config, the emulated hosts (if any), the
// addresses, and the restart policy (with a warning when a restarted PS
// shard cannot be recovered). Newline-terminated lines.
std::string FormatPlan(const LaunchPlan& plan);

// The end of a successful run in a few lines instead of result.json's JSON:
// roles restarted, accuracy, images/sec, final loss and wall time,
// recoveries, where checkpoints, summaries and the timeline are. A
// result.json this pstrain cannot read is shown as it is.
std::string FormatSummary(const ExperimentConfig& config, const std::string& result_path,
                          const ClusterOutcome& outcome);

}  // namespace pstrain::launch
