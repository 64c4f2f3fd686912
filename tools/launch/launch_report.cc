#include "tools/launch/launch_report.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/metrics/result_json.h"
#include "tools/launch/role_check.h"

namespace pstrain::launch {
namespace {

void AddLine(std::string& out, const std::string& line) { absl::StrAppend(&out, "launch: ", line, "\n"); }

std::string FileText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// "accuracy | images/sec (workers x devices) | final loss (its meaning) | seconds".
std::string ResultLine(const RunResult& result) {
  std::string line = "summary:";
  if (result.has_test_accuracy())
    absl::StrAppend(&line, absl::StrFormat(" test accuracy %.4f |", result.test_accuracy()));
  absl::StrAppend(&line, absl::StrFormat(" %.1f images/sec (%d workers x %d devices) | final loss %.4f (the "
                                         "workers' mean over their last 10 steps) | %.1f s",
                                         result.images_per_sec(), result.num_workers(), result.devices_per_worker(),
                                         result.final_loss(), result.wall_seconds()));
  return line;
}

// Where the run's other outputs went; "" when it wrote none.
std::string OutputsLine(const ExperimentConfig& config) {
  std::vector<std::string> outputs;
  if (!config.checkpoint().dir().empty()) outputs.push_back(absl::StrCat("checkpoints ", config.checkpoint().dir()));
  if (!config.summaries().dir().empty()) outputs.push_back(absl::StrCat("summaries ", config.summaries().dir()));
  if (!config.timeline().path().empty()) outputs.push_back(absl::StrCat("timeline ", config.timeline().path()));
  return absl::StrJoin(outputs, "; ");
}

}  // namespace

std::string FormatPlan(const LaunchPlan& plan) {
  const int num_ps = plan.experiment.cluster().ps_hosts_size();
  const int num_workers = plan.experiment.cluster().worker_hosts_size();
  const int max_restarts = plan.options.max_restarts;
  std::string out;
  AddLine(out,
          absl::StrCat(num_ps, " PS and ", num_workers, " workers from ", plan.config, "; run dir ", plan.run_dir));
  AddLine(out, absl::StrCat("the config is accepted by ", absl::StrJoin(plan.accepted_by, " and "), " (",
                            kCheckConfigFlag, ")"));
  if (plan.addresses.emulated != nullptr) {
    AddLine(out, absl::StrCat("emulation: ", plan.addresses.emulated->Describe()));
    std::vector<std::string> changes;
    for (const auto& change : plan.experiment.emulation().link_changes()) {
      changes.push_back(absl::StrCat(change.gbps(), " Gbit/s at ", change.after_seconds(), " s"));
    }
    if (!changes.empty()) {
      AddLine(out, absl::StrCat("emulation: links change to ", absl::StrJoin(changes, ", then "),
                                " (emulated time after the start)"));
    }
  }
  AddLine(out, absl::StrCat("--ps_hosts=", plan.addresses.ps_hosts, " --worker_hosts=", plan.addresses.worker_hosts));
  if (max_restarts > 0) {
    AddLine(out,
            absl::StrCat("a role that fails is restarted up to ", max_restarts, " time", max_restarts == 1 ? "" : "s",
                         num_ps > 0 && plan.experiment.timeouts().ps_recover_seconds() <= 0
                             ? " (timeouts.ps_recover_seconds is 0: a restarted PS shard still ends the run)"
                         : plan.recovery_by_default
                             ? absl::StrCat(" (recovery on: a restarted PS shard is restored from the newest "
                                            "checkpoint; --ps_recover_seconds=",
                                            kDefaultPsRecoverSeconds, ", timeouts.ps_recover_seconds sets it)")
                             : ""));
  }
  return out;
}

std::string FormatSummary(const ExperimentConfig& config, const std::string& result_path,
                          const ClusterOutcome& outcome) {
  std::string out;
  std::vector<std::string> restarts;
  for (const RoleExit& exit : outcome.exits) {
    if (exit.restarts > 0) restarts.push_back(absl::StrCat(exit.name, " ", exit.restarts, "x"));
  }
  if (!restarts.empty()) AddLine(out, absl::StrCat("restarted: ", absl::StrJoin(restarts, ", ")));
  absl::StatusOr<RunResult> result = ReadResultJson(result_path);
  if (!result.ok()) {
    // Not one this pstrain wrote: show it as it is.
    AddLine(out, absl::StrCat("no summary (", result.status().message(), "); result.json:"));
    return out + FileText(result_path);
  }
  AddLine(out, ResultLine(*result));
  for (const std::string& warning : result->warnings()) AddLine(out, absl::StrCat("WARNING: ", warning));
  for (const Recovery& recovery : result->recoveries()) {
    AddLine(out, absl::StrCat("recovered: restored step ", recovery.restored_step(), " after: ", recovery.failure()));
  }
  if (const std::string outputs = OutputsLine(config); !outputs.empty()) AddLine(out, outputs);
  return out;
}

}  // namespace pstrain::launch
