// HeartbeatProbe: sends a heartbeat every `interval` from a thread of its
// own while a benchmark phase moves bulk bytes, and keeps the round trips,
// so the benchmark shows whether control traffic waits behind bulk traffic
// (docs/TRANSPORTS.md, "Control traffic first").
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pstrain::bench {

// The round trips seen, failed calls included (a failure counts the time
// until it failed).
struct HeartbeatRoundTrips {
  int64_t count = 0;
  int64_t failures = 0;
  double max_seconds = 0;
  double sum_seconds = 0;
};

class HeartbeatProbe {
 public:
  // Starts the thread: `beat` (one blocking heartbeat call) now and then
  // every `interval` after the previous one returned.
  HeartbeatProbe(std::function<absl::Status()> beat, absl::Duration interval);
  // Stops (waiting for a call in flight) if Stop was not called.
  ~HeartbeatProbe();
  HeartbeatProbe(const HeartbeatProbe&) = delete;
  HeartbeatProbe& operator=(const HeartbeatProbe&) = delete;

  // Stops the thread once its call in flight returns; the round trips.
  HeartbeatRoundTrips Stop();

 private:
  void Loop();

  const std::function<absl::Status()> beat_;
  const absl::Duration interval_;
  absl::Notification stop_;
  absl::Mutex mu_;
  HeartbeatRoundTrips trips_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pstrain::bench
