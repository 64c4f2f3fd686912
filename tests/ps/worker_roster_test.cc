// WorkerRoster on its own (ps/shard/worker_roster.h): liveness limits,
// progress, incarnations and rejoins, departures and reports, pauses.
#include "ps/shard/worker_roster.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kStart = absl::FromUnixSeconds(1000);
const absl::Duration kLostAfter = absl::Seconds(10);
const absl::Duration kStartup = absl::Seconds(60);

std::vector<int> SilentAt(const WorkerRoster& roster, absl::Time now) {
  std::vector<int> workers;
  for (const WorkerRoster::Silent& s : roster.SilentWorkers(now, kLostAfter, kStartup)) workers.push_back(s.worker);
  return workers;
}

WorkerReport Report(int worker, int64_t steps) {
  WorkerReport report;
  report.set_worker(worker);
  report.set_steps(steps);
  return report;
}

TEST(WorkerRosterTest, StartsWithEveryWorkerPresentAndNothingDone) {
  WorkerRoster roster(3, kStart);
  EXPECT_EQ(roster.size(), 3);
  EXPECT_THAT(roster.progress().completed_steps, ElementsAre(0, 0, 0));
  EXPECT_THAT(roster.progress().done, ElementsAre(false, false, false));
  EXPECT_THAT(roster.progress().lost, ElementsAre(false, false, false));
  for (int w = 0; w < 3; ++w) {
    EXPECT_FALSE(roster.departed()[w].load());
    EXPECT_FALSE(roster.rejoined(w));
    EXPECT_EQ(roster.repeats_below(w), 0);
  }
  EXPECT_FALSE(roster.AllDoneOrLost());
  EXPECT_THAT(roster.Lost(), IsEmpty());
  EXPECT_THAT(roster.reports(), IsEmpty());
}

TEST(WorkerRosterTest, AWorkerNeverHeardFromHasTheStartupLimitFromCreation) {
  WorkerRoster roster(2, kStart);
  EXPECT_THAT(SilentAt(roster, kStart + kStartup), IsEmpty());  // at the limit: not yet
  roster.Heard(1, kStart + absl::Seconds(1), 0);
  const std::vector<WorkerRoster::Silent> silent =
      roster.SilentWorkers(kStart + kStartup + absl::Seconds(1), kLostAfter, kStartup);
  ASSERT_EQ(silent.size(), 2u);  // worker 1 is past its (shorter) lost limit too
  EXPECT_EQ(silent[0].worker, 0);
  EXPECT_EQ(silent[0].silent, kStartup + absl::Seconds(1));
  EXPECT_EQ(silent[0].what, "worker 0 never connected within startup_seconds (1m)");
  EXPECT_EQ(silent[1].worker, 1);
  EXPECT_EQ(silent[1].what, "worker 1 lost: no heartbeat for 1m (last step 0)");
}

TEST(WorkerRosterTest, AWorkerHeardFromIsSilentOnlyPastTheLostLimitSinceItWasLastHeard) {
  WorkerRoster roster(1, kStart);
  roster.Heard(0, kStart + absl::Seconds(5), 7);
  roster.Heard(0, kStart + absl::Seconds(20), 3);  // an older step does not move it back
  EXPECT_THAT(SilentAt(roster, kStart + absl::Seconds(30)), IsEmpty());
  const std::vector<WorkerRoster::Silent> silent =
      roster.SilentWorkers(kStart + absl::Seconds(31), kLostAfter, kStartup);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].silent, absl::Seconds(11));
  EXPECT_EQ(silent[0].what, "worker 0 lost: no heartbeat for 11s (last step 7)");
}

TEST(WorkerRosterTest, PushesCountCompletedStepsThatNeverGoBack) {
  WorkerRoster roster(2, kStart);
  roster.Pushed(1, kStart + absl::Seconds(1), /*step=*/4, /*local_step=*/2);
  EXPECT_THAT(roster.progress().completed_steps, ElementsAre(0, 3));
  roster.Pushed(1, kStart + absl::Seconds(2), /*step=*/3, /*local_step=*/1);  // a late batch of an older step
  EXPECT_THAT(roster.progress().completed_steps, ElementsAre(0, 3));
  // A push is also a sign of life, with its step.
  const std::vector<WorkerRoster::Silent> silent =
      roster.SilentWorkers(kStart + absl::Seconds(13), kLostAfter, kStartup);
  ASSERT_EQ(silent.size(), 1u);
  EXPECT_EQ(silent[0].what, "worker 1 lost: no heartbeat for 11s (last step 4)");
}

TEST(WorkerRosterTest, ResumingSetsEveryWorkersProgressToTheStep) {
  WorkerRoster roster(2, kStart);
  roster.Pushed(0, kStart, 9, 9);
  roster.ResumeAt(5);
  EXPECT_THAT(roster.progress().completed_steps, ElementsAre(5, 5));
  roster.Heard(1, kStart, 0);
  const std::vector<WorkerRoster::Silent> silent =
      roster.SilentWorkers(kStart + absl::Seconds(11), kLostAfter, kStartup);
  ASSERT_EQ(silent.size(), 2u);
  EXPECT_EQ(silent[1].what, "worker 1 lost: no heartbeat for 11s (last step 4)");
}

TEST(WorkerRosterTest, OnlyAChangedKnownIncarnationIsARestart) {
  WorkerRoster roster(1, kStart);
  EXPECT_FALSE(roster.NoteIncarnation(0, 0));   // unknown
  EXPECT_FALSE(roster.NoteIncarnation(0, 11));  // the first one known
  EXPECT_FALSE(roster.NoteIncarnation(0, 11));
  EXPECT_FALSE(roster.NoteIncarnation(0, 0));  // unknown again: ignored
  EXPECT_TRUE(roster.NoteIncarnation(0, 12));
  EXPECT_FALSE(roster.NoteIncarnation(0, 12));  // recorded
  EXPECT_TRUE(roster.NoteIncarnation(0, 11));
}

TEST(WorkerRosterTest, ARejoiningLostWorkerCountsAgainAndDropsItsRepeats) {
  WorkerRoster roster(2, kStart);
  roster.Heard(0, kStart, 3);
  roster.Lose(0);
  EXPECT_THAT(roster.Lost(), ElementsAre(0));
  EXPECT_TRUE(roster.departed()[0].load());

  EXPECT_TRUE(roster.Rejoin(0, /*repeats_below=*/4, kStart + absl::Seconds(100)));
  EXPECT_TRUE(roster.rejoined(0));
  EXPECT_FALSE(roster.rejoined(1));
  EXPECT_EQ(roster.repeats_below(0), 4);
  EXPECT_THAT(roster.Lost(), IsEmpty());
  EXPECT_FALSE(roster.departed()[0].load());
  // Heard from as it rejoined.
  EXPECT_THAT(SilentAt(roster, kStart + absl::Seconds(110)), ElementsAre(1));
  EXPECT_THAT(SilentAt(roster, kStart + absl::Seconds(111)), ElementsAre(0, 1));

  EXPECT_FALSE(roster.Rejoin(0, 6, kStart));  // not lost this time
  EXPECT_EQ(roster.repeats_below(0), 6);
  roster.ForgetRepeats();
  EXPECT_EQ(roster.repeats_below(0), 0);
  EXPECT_TRUE(roster.rejoined(0));
}

TEST(WorkerRosterTest, FinishingPushingDepartsOnce) {
  WorkerRoster roster(2, kStart);
  EXPECT_TRUE(roster.FinishedPushing(1));
  EXPECT_FALSE(roster.FinishedPushing(1));
  EXPECT_FALSE(roster.departed()[0].load());
  EXPECT_TRUE(roster.departed()[1].load());
  // Departed is not done: it is still expected to say Done.
  EXPECT_THAT(roster.progress().done, ElementsAre(false, false));
  EXPECT_THAT(SilentAt(roster, kStart + kStartup + absl::Seconds(1)), ElementsAre(0, 1));
}

TEST(WorkerRosterTest, DoneKeepsTheFirstReportAndEndsWhenEveryWorkerIsDoneOrLost) {
  WorkerRoster roster(3, kStart);
  EXPECT_TRUE(roster.Done(2, Report(2, 40)));
  EXPECT_FALSE(roster.Done(2, Report(2, 41)));
  EXPECT_TRUE(roster.departed()[2].load());
  EXPECT_TRUE(roster.Done(0, Report(0, 39)));
  ASSERT_EQ(roster.reports().size(), 2u);
  EXPECT_EQ(roster.reports()[0].steps(), 40);
  EXPECT_EQ(roster.reports()[1].worker(), 0);
  EXPECT_FALSE(roster.AllDoneOrLost());
  // Done and lost workers are no longer watched.
  EXPECT_THAT(SilentAt(roster, kStart + kStartup + absl::Seconds(1)), ElementsAre(1));
  roster.Lose(1);
  EXPECT_TRUE(roster.AllDoneOrLost());
  EXPECT_THAT(roster.Lost(), ElementsAre(1));
  EXPECT_THAT(SilentAt(roster, kStart + kStartup + absl::Seconds(1)), IsEmpty());
}

TEST(WorkerRosterTest, TheDepartedFlagsStayPutWhenTheRosterMoves) {
  WorkerRoster roster(2, kStart);
  const std::atomic<bool>* flags = roster.departed();
  WorkerRoster moved = std::move(roster);
  EXPECT_EQ(moved.departed(), flags);
  moved.Lose(1);
  EXPECT_TRUE(flags[1].load());
}

// Elastic runs: workers start absent (departed, never silent), join with
// their first request, and are not waited for at the end.
TEST(WorkerRosterTest, AbsentWorkersAreNotWaitedForUntilTheyArrive) {
  WorkerRoster roster(3, kStart, /*start_absent=*/true);
  for (int w = 0; w < 3; ++w) EXPECT_TRUE(roster.departed()[w].load());
  EXPECT_THAT(roster.Absent(), ElementsAre(0, 1, 2));
  EXPECT_THAT(SilentAt(roster, kStart + kStartup + absl::Seconds(1)), IsEmpty());
  EXPECT_FALSE(roster.AllDoneOrLost());  // nobody has run yet

  EXPECT_TRUE(roster.Arrive(0, kStart));
  EXPECT_FALSE(roster.Arrive(0, kStart));  // once
  EXPECT_TRUE(roster.Arrive(1, kStart));
  EXPECT_FALSE(roster.departed()[0].load());
  EXPECT_THAT(roster.Present(), ElementsAre(0, 1));
  EXPECT_THAT(roster.Absent(), ElementsAre(2));

  roster.Pushed(0, kStart + absl::Seconds(1), 6, 6);
  roster.Pushed(1, kStart + absl::Seconds(1), 4, 4);
  // Worker 2 joins late: its ssp clock starts at the slowest present one's.
  EXPECT_TRUE(roster.Arrive(2, kStart + absl::Seconds(2)));
  EXPECT_EQ(roster.progress().completed_steps[2], 5);
  EXPECT_THAT(roster.Absent(), IsEmpty());
}

TEST(WorkerRosterTest, WorkersThatNeverCameDoNotHoldUpTheEnd) {
  WorkerRoster roster(3, kStart, /*start_absent=*/true);
  roster.Arrive(0, kStart);
  roster.Arrive(1, kStart);
  EXPECT_TRUE(roster.Done(0, Report(0, 10)));
  EXPECT_FALSE(roster.AllDoneOrLost());  // worker 1 is still training
  EXPECT_TRUE(roster.Done(1, Report(1, 10)));
  EXPECT_TRUE(roster.AllDoneOrLost());  // worker 2 never came
}

TEST(WorkerRosterTest, APausedWorkerIsDepartedUntilItResumesAtTheSlowestClock) {
  WorkerRoster roster(3, kStart);
  for (int w = 0; w < 3; ++w) roster.Heard(w, kStart, 0);
  roster.Pushed(0, kStart, 4, 4);  // 5 steps completed
  roster.Pushed(1, kStart, 6, 6);  // 7
  roster.Pushed(2, kStart, 1, 1);  // 2: it pauses
  EXPECT_EQ(roster.SetPaused(2, true), WorkerRoster::Pause::kPaused);
  EXPECT_EQ(roster.SetPaused(2, true), WorkerRoster::Pause::kUnchanged);  // heartbeats repeat the state
  EXPECT_TRUE(roster.departed()[2].load());
  EXPECT_THAT(roster.progress().paused, ElementsAre(false, false, true));
  EXPECT_THAT(roster.Present(), ElementsAre(0, 1, 2));  // still in the run
  EXPECT_FALSE(roster.AllDoneOrLost());
  EXPECT_EQ(roster.SetPaused(2, false), WorkerRoster::Pause::kResumed);
  EXPECT_FALSE(roster.departed()[2].load());
  // Its clock moves up to the slowest present worker's: nobody waits for it to catch up.
  EXPECT_EQ(roster.progress().completed_steps[2], 5);
}

TEST(WorkerRosterTest, ResumingNeverUndoesAFinishOrALoss) {
  WorkerRoster roster(3, kStart);
  roster.SetPaused(0, true);
  EXPECT_FALSE(roster.FinishedPushing(0));  // departed already, by the pause
  EXPECT_EQ(roster.SetPaused(0, false), WorkerRoster::Pause::kResumed);
  EXPECT_TRUE(roster.departed()[0].load()) << "it finished pushing";
  roster.SetPaused(1, true);
  roster.Lose(1);
  roster.SetPaused(1, false);
  EXPECT_TRUE(roster.departed()[1].load()) << "it is lost";
  roster.SetPaused(2, true);
  ASSERT_TRUE(roster.Done(2, Report(2, 9)));
  roster.SetPaused(2, false);
  EXPECT_TRUE(roster.departed()[2].load()) << "it is done";
}

TEST(WorkerRosterTest, ANewProcessOfAPausedWorkerIsNeitherPausedNorDeparted) {
  WorkerRoster roster(2, kStart);
  ASSERT_FALSE(roster.NoteIncarnation(1, 11));
  roster.SetPaused(1, true);
  ASSERT_TRUE(roster.NoteIncarnation(1, 12));
  roster.Rejoin(1, 3, kStart + absl::Seconds(1));
  EXPECT_FALSE(roster.progress().paused[1]);
  EXPECT_FALSE(roster.departed()[1].load());
}

}  // namespace
}  // namespace pstrain
