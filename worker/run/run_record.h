// The run's record (result.json; proto/results.proto RunResult) as a worker
// assembles it at the end of its run: what the config asked for, then what
// the workers and shards reported.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/config.pb.h"
#include "proto/results.pb.h"
#include "worker/strategy.h"

namespace pstrain {

// The fields that describe the experiment: names from the config, the
// cluster's sizes, batch sizes, `steps`, the model's name and the
// collective in use ("" without one).
RunResult DescribeRun(const ExperimentConfig& config, const std::string& model_name, const std::string& collective,
                      int64_t total_steps);

// Adds every worker's report (sorted by worker), the shards' load and the
// recoveries; images_per_sec is the sum over the workers (they run at the
// same time), its stddev combines theirs, final_loss is their mean; each
// worker's warnings join `warnings` as "worker <i>: <warning>".
// The membership changes and the data ledger's counts go in as reported.
void AddReports(const ClusterReport& cluster, const std::vector<Recovery>& recoveries, RunResult* result);

// The chief's lines about membership and the data ledger: one per change
// ("membership: worker 2 lost at step 57, ...") and one with the ledger's
// counts; none when neither happened.
std::vector<std::string> MembershipLines(const RunResult& result);

// The chief's summary of the workers named slower than their peers
// (result.stragglers), with what each cost: its busy seconds beyond its
// peers' pace (under sync, about how long the others waited for it; a share
// of `wall_seconds`) and, with data.sharding dynamic, the share of the
// examples it read against an even share. "stragglers: none" when every
// worker kept pace and the shards could tell (parameter servers).
std::vector<std::string> StragglerSummary(const RunResult& result, double wall_seconds);

// One line for an emulated run: hosts, links, time scale, scaling efficiency
// and whether this machine kept up.
std::string EmulationSummary(const Emulation& emulation);

// Writes `result` as run_dir/result.json (creating run_dir) and prints
// "result: <path>". An error names the directory or file that failed.
absl::Status WriteRunResult(const RunResult& result, const std::string& run_dir);

}  // namespace pstrain
