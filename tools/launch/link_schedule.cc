#include "tools/launch/link_schedule.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/config/byte_scale.h"
#include "common/config/time_dilation.h"

namespace pstrain::launch {

std::vector<LinkStep> LinkStepsOf(const ExperimentConfig& experiment, double byte_scale) {
  const double scale = TimeDilation(experiment);
  const double link_scale = LinkDilation(experiment, byte_scale);
  std::vector<LinkStep> steps;
  for (const EmulationConfig::LinkChange& change : experiment.emulation().link_changes()) {
    steps.push_back({.at = absl::Seconds(change.after_seconds() * scale),
                     .gbps = change.gbps() / link_scale,
                     .model_gbps = change.gbps(),
                     .model_seconds = change.after_seconds()});
  }
  return steps;
}

LinkSchedule::LinkSchedule(EmulatedCluster* cluster, std::vector<LinkStep> steps,
                           std::function<void(const std::string&)> say)
    : cluster_(cluster), steps_(std::move(steps)), say_(std::move(say)) {
  thread_ = std::thread([this, start = absl::Now()] { Run(start); });
}

LinkSchedule::~LinkSchedule() {
  stop_.Notify();
  thread_.join();
}

void LinkSchedule::Run(absl::Time start) {
  for (const LinkStep& step : steps_) {
    if (stop_.WaitForNotificationWithDeadline(start + step.at)) return;
    const absl::Status set = cluster_->SetLinks(step.gbps);
    const std::string when = absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
    if (!set.ok()) {
      say_(absl::StrCat("launch: could not change the links at ", when, " (", step.model_seconds,
                        " s emulated): ", set.message(), "; the run goes on at the links it has"));
      return;
    }
    say_(
        absl::StrFormat("launch: links now %g Gbit/s each way (%g Gbit/s on the wire), %g s emulated after the "
                        "start, at %s",
                        step.model_gbps, step.gbps, step.model_seconds, when));
  }
}

}  // namespace pstrain::launch
