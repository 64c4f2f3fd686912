// PeriodicThread: calls `tick` every `period` on a thread of its own until
// Stop or destruction (a worker's heartbeats to the PS shards). Stop waits
// for a tick under way and is idempotent; a tick never runs after it.
#pragma once

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pstrain {

class PeriodicThread {
 public:
  PeriodicThread(absl::Duration period, std::function<void()> tick);
  ~PeriodicThread() { Stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void Stop();

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace pstrain
