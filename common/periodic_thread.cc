#include "common/periodic_thread.h"

#include <utility>

namespace pstrain {

PeriodicThread::PeriodicThread(absl::Duration period, std::function<void()> tick)
    : thread_([this, period, tick = std::move(tick)] {
        while (!stop_.WaitForNotificationWithTimeout(period)) tick();
      }) {}

void PeriodicThread::Stop() {
  if (!thread_.joinable()) return;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  thread_.join();
}

}  // namespace pstrain
