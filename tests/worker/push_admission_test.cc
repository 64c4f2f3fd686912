// The rule that decides which pushes go (worker/push_admission.h).
#include "worker/push_admission.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

using Verdict = PushAdmission::Verdict;

TEST(PushAdmissionTest, OnePerShardLetsAnotherShardGoAndWaitsForTheAnswer) {
  PushAdmission a(/*window_bytes=*/0, /*pushes_per_shard=*/1, /*num_shards=*/2);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kShardBusy);
  EXPECT_EQ(a.Admit(100, 1), Verdict::kSend);
  EXPECT_EQ(a.bytes_in_flight(), 200);
  a.Done(100, 0);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(100, 1), Verdict::kShardBusy);
}

TEST(PushAdmissionTest, WindowStopsTheWalkButOnePushAlwaysGoes) {
  PushAdmission a(/*window_bytes=*/250, /*pushes_per_shard=*/0, /*num_shards=*/1);
  EXPECT_EQ(a.Admit(1000, 0), Verdict::kSend) << "larger than the window, nothing in flight";
  EXPECT_EQ(a.Admit(1, 0), Verdict::kWindowFull);
  a.Done(1000, 0);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kWindowFull) << "300 > 250";
  EXPECT_EQ(a.Admit(50, 0), Verdict::kSend) << "exactly 250";
}

TEST(PushAdmissionTest, SaturatedWhenEveryShardIsBusyOrTheWindowIsFull) {
  PushAdmission shards(/*window_bytes=*/0, /*pushes_per_shard=*/2, /*num_shards=*/2);
  for (int shard : {0, 0, 1}) {
    EXPECT_FALSE(shards.Saturated());
    EXPECT_EQ(shards.Admit(10, shard), Verdict::kSend);
  }
  EXPECT_FALSE(shards.Saturated()) << "shard 1 has room for one more";
  EXPECT_EQ(shards.Admit(10, 1), Verdict::kSend);
  EXPECT_TRUE(shards.Saturated());
  shards.Done(10, 0);
  EXPECT_FALSE(shards.Saturated());

  PushAdmission window(/*window_bytes=*/100, /*pushes_per_shard=*/0, /*num_shards=*/1);
  EXPECT_EQ(window.Admit(60, 0), Verdict::kSend);
  EXPECT_FALSE(window.Saturated());
  EXPECT_EQ(window.Admit(40, 0), Verdict::kSend);
  EXPECT_TRUE(window.Saturated());
  EXPECT_FALSE(PushAdmission(0, 0, 1).Saturated()) << "no limits";
}

TEST(PushAdmissionTest, AColocatedShardTakesOnePushMore) {
  PushAdmission a(/*window_bytes=*/0, /*pushes_per_shard=*/1, /*num_shards=*/2, /*colocated=*/{true, false});
  EXPECT_EQ(a.LimitOf(0), 2);
  EXPECT_EQ(a.LimitOf(1), 1);
  EXPECT_EQ(a.Admit(10, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(10, 0), Verdict::kSend) << "one applied, one copied in";
  EXPECT_EQ(a.Admit(10, 0), Verdict::kShardBusy);
  EXPECT_EQ(a.Admit(10, 1), Verdict::kSend);
  EXPECT_EQ(a.Admit(10, 1), Verdict::kShardBusy) << "across a link: one at a time";
  EXPECT_TRUE(a.Saturated());
  a.Done(10, 0);
  EXPECT_FALSE(a.Saturated());
  EXPECT_EQ(a.Admit(10, 0), Verdict::kSend);

  PushAdmission unlimited(0, /*pushes_per_shard=*/0, 1, {true});
  EXPECT_EQ(unlimited.LimitOf(0), 0) << "no limit stays no limit";
  PushAdmission two(0, /*pushes_per_shard=*/2, 2, {false, true});
  EXPECT_EQ(two.LimitOf(1), 3);
  two.Configure(0, 1, 3);
  EXPECT_EQ(two.LimitOf(1), 1) << "Configure without colocated shards: none is";
}

TEST(PushAdmissionTest, WindowIsCheckedBeforeTheShard) {
  PushAdmission a(/*window_bytes=*/100, /*pushes_per_shard=*/1, /*num_shards=*/2);
  EXPECT_EQ(a.Admit(100, 0), Verdict::kSend);
  EXPECT_EQ(a.Admit(10, 0), Verdict::kWindowFull);
}

TEST(PushAdmissionTest, ClearAndConfigureForgetWhatWasInFlight) {
  PushAdmission a(0, 1, 1);
  EXPECT_EQ(a.Admit(10, 0), Verdict::kSend);
  a.Clear();
  EXPECT_EQ(a.bytes_in_flight(), 0);
  EXPECT_EQ(a.Admit(10, 0), Verdict::kSend);
  a.Configure(0, 2, 3);
  EXPECT_EQ(a.Admit(10, 2), Verdict::kSend);
  EXPECT_EQ(a.Admit(10, 2), Verdict::kSend);
  EXPECT_EQ(a.Admit(10, 2), Verdict::kShardBusy);
}

}  // namespace
}  // namespace pstrain
