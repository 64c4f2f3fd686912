// PeriodicThread (common/periodic_thread.h): it ticks until Stop, never
// after; Stop twice and destruction without Stop are fine.
#include "common/periodic_thread.h"

#include <atomic>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Waits (up to 30 s, far beyond any scheduler delay) for `ticks` to reach `n`.
bool Reaches(const std::atomic<int>& ticks, int n) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (ticks.load() < n && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  return ticks.load() >= n;
}

TEST(PeriodicThreadTest, TicksUntilStoppedAndNeverAfter) {
  std::atomic<int> ticks{0};
  PeriodicThread thread(absl::Milliseconds(1), [&] { ++ticks; });
  ASSERT_TRUE(Reaches(ticks, 3));
  thread.Stop();
  const int stopped_at = ticks.load();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(ticks.load(), stopped_at);
  thread.Stop();  // again: nothing to do
}

TEST(PeriodicThreadTest, DestructionStopsIt) {
  std::atomic<int> ticks{0};
  {
    PeriodicThread thread(absl::Milliseconds(1), [&] { ++ticks; });
    ASSERT_TRUE(Reaches(ticks, 1));
  }
  const int after = ticks.load();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(ticks.load(), after);
}

TEST(PeriodicThreadTest, NoTickBeforeTheFirstPeriod) {
  std::atomic<int> ticks{0};
  PeriodicThread thread(absl::Hours(1), [&] { ++ticks; });
  thread.Stop();  // at once: the hour never passed
  EXPECT_EQ(ticks.load(), 0);
}

}  // namespace
}  // namespace pstrain
