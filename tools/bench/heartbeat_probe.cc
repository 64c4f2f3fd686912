#include "tools/bench/heartbeat_probe.h"

#include <algorithm>
#include <utility>

namespace pstrain::bench {

HeartbeatProbe::HeartbeatProbe(std::function<absl::Status()> beat, absl::Duration interval)
    : beat_(std::move(beat)), interval_(interval), thread_([this] { Loop(); }) {}

HeartbeatProbe::~HeartbeatProbe() {
  if (thread_.joinable()) Stop();
}

HeartbeatRoundTrips HeartbeatProbe::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  return trips_;
}

void HeartbeatProbe::Loop() {
  do {
    const absl::Time start = absl::Now();
    const bool ok = beat_().ok();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    absl::MutexLock lock(&mu_);
    ++trips_.count;
    if (!ok) ++trips_.failures;
    trips_.max_seconds = std::max(trips_.max_seconds, seconds);
    trips_.sum_seconds += seconds;
  } while (!stop_.WaitForNotificationWithTimeout(interval_));
}

}  // namespace pstrain::bench
