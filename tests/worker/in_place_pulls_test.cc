// InPlacePulls: a call's destination places while the call is open and no
// Stop() came since; Stop() waits for the calls that placed parts to
// complete, and no part of an older call is placed after it.
#include "worker/in_place_pulls.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// A destination that gives `memory` at the offset asked, counting calls.
PayloadDestination Into(char* memory, std::atomic<int>* asked) {
  return [memory, asked](uint64_t offset, size_t) -> void* {
    ++*asked;
    return memory + offset;
  };
}

TEST(InPlacePullsTest, PlacesWhileOpenAndNothingOnceCompleted) {
  InPlacePulls pulls;
  char memory[64];
  std::atomic<int> asked{0};
  InPlacePulls::Call call = pulls.Open(Into(memory, &asked));
  ASSERT_TRUE(call.receive_into);
  EXPECT_EQ(call.receive_into(8, 4), memory + 8);
  call.ticket->Complete();
  EXPECT_EQ(call.receive_into(8, 4), nullptr);
  EXPECT_EQ(asked.load(), 1) << "a completed call's destination was asked";
  pulls.Stop();  // nothing open: returns at once
}

TEST(InPlacePullsTest, NoDestinationGivesACallWithNothing) {
  InPlacePulls pulls;
  InPlacePulls::Call call = pulls.Open(nullptr);
  EXPECT_FALSE(call.receive_into);
  EXPECT_EQ(call.ticket, nullptr);
}

TEST(InPlacePullsTest, StopWaitsForCallsThatPlacedAndEndsPlacingForTheOthers) {
  InPlacePulls pulls;
  char memory[64];
  std::atomic<int> asked{0};
  InPlacePulls::Call placed = pulls.Open(Into(memory, &asked));
  InPlacePulls::Call idle = pulls.Open(Into(memory, &asked));
  ASSERT_NE(placed.receive_into(0, 16), nullptr);

  absl::Notification stopped;
  std::thread stopper([&] {
    pulls.Stop();
    stopped.Notify();
  });
  // The call that placed is still open: Stop must wait for it.
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  // Meanwhile neither call places any more (a new generation began).
  EXPECT_EQ(idle.receive_into(16, 16), nullptr);
  EXPECT_EQ(placed.receive_into(32, 16), nullptr);
  placed.ticket->Complete();
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(10)));
  stopper.join();
  idle.ticket->Complete();

  // A call opened after Stop places again.
  InPlacePulls::Call after = pulls.Open(Into(memory, &asked));
  EXPECT_EQ(after.receive_into(4, 4), memory + 4);
  after.ticket->Complete();
  after.ticket->Complete();  // once is enough; twice is harmless
}

}  // namespace
}  // namespace pstrain
