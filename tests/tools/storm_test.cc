// pstrain-storm's pieces (tools/storm/): the seeded schedule and the recovery
// times read from the chief's progress lines.
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/storm/storm_plan.h"
#include "tools/storm/storm_recovery.h"

namespace pstrain::storm {
namespace {

using ::testing::HasSubstr;

StormOptions FourWorkersTwoShards() {
  StormOptions o;
  o.seed = 7;
  o.events = 30;
  o.workers = 4;
  o.ps = 2;
  o.kinds = {FaultKind::kKillWorker, FaultKind::kPauseWorker, FaultKind::kKillPs};
  return o;
}

TEST(StormPlanTest, TheSameSeedGivesTheSameStormAndAnotherSeedAnother) {
  absl::StatusOr<std::vector<Fault>> a = PlanStorm(FourWorkersTwoShards());
  absl::StatusOr<std::vector<Fault>> b = PlanStorm(FourWorkersTwoShards());
  StormOptions other = FourWorkersTwoShards();
  other.seed = 8;
  absl::StatusOr<std::vector<Fault>> c = PlanStorm(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->size(), 30u);
  bool differs = false;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].at, (*b)[i].at);
    EXPECT_EQ((*a)[i].kind, (*b)[i].kind);
    EXPECT_EQ((*a)[i].target, (*b)[i].target);
    differs = differs || (*a)[i].at != (*c)[i].at || (*a)[i].target != (*c)[i].target;
  }
  EXPECT_TRUE(differs);
}

TEST(StormPlanTest, FaultsKeepTheirSlotsSpareTheChiefAndShardZeroAndUseEveryKind) {
  const StormOptions o = FourWorkersTwoShards();
  absl::StatusOr<std::vector<Fault>> faults = PlanStorm(o);
  ASSERT_TRUE(faults.ok());
  std::set<FaultKind> kinds;
  std::set<int> workers;
  for (size_t i = 0; i < faults->size(); ++i) {
    const Fault& f = (*faults)[i];
    // Fault i lands in the first half of its slot, so they are in order.
    EXPECT_GE(f.at, o.start + o.every * static_cast<double>(i));
    EXPECT_LT(f.at, o.start + o.every * (static_cast<double>(i) + 0.5));
    kinds.insert(f.kind);
    if (f.kind == FaultKind::kKillPs) {
      EXPECT_EQ(f.target, 1) << "shard 0 holds the ledger";
    } else {
      EXPECT_GE(f.target, 1) << "the chief hosts the group's store";
      EXPECT_LT(f.target, 4);
      workers.insert(f.target);
    }
    EXPECT_GE(f.pause, o.min_pause);
    EXPECT_LE(f.pause, o.max_pause);
  }
  EXPECT_EQ(kinds.size(), 3u);
  EXPECT_EQ(workers, (std::set<int>{1, 2, 3}));
}

TEST(StormPlanTest, RefusesAStormWithNothingToFault) {
  StormOptions o = FourWorkersTwoShards();
  o.ps = 1;  // only shard 0
  absl::StatusOr<std::vector<Fault>> faults = PlanStorm(o);
  ASSERT_FALSE(faults.ok());
  EXPECT_THAT(faults.status().message(), HasSubstr("kill_ps: no PS shard to fault"));
  o = FourWorkersTwoShards();
  o.events = 0;
  EXPECT_THAT(PlanStorm(o).status().message(), HasSubstr("--events must be >= 1, got 0"));
  EXPECT_THAT(ParseFault("kill_chief").status().message(), HasSubstr("unknown fault 'kill_chief'"));
  EXPECT_EQ(*ParseFault("pause_worker"), FaultKind::kPauseWorker);
}

TEST(StormRecoveryTest, ReadsOnlyTheChiefsProgressLines) {
  EXPECT_EQ(ChiefStep("[worker0] 120\timages/sec: 3314.1 +/- 99.5 (jitter = 820.8)\t0.458"), 120);
  EXPECT_FALSE(ChiefStep("[worker1] 120\timages/sec: 3314.1"));
  EXPECT_FALSE(ChiefStep("[worker0] Step\tImg/sec +/- its standard error"));
  EXPECT_FALSE(ChiefStep("[worker0] elastic: generation 1: workers [0,1,3]"));
  EXPECT_FALSE(ChiefStep("[worker0] 12x\timages/sec"));
}

// Progress every second, 10 steps apart, with a stall from t = 20 to 26:
// a fault at 5.5 s recovers with the next line (20 steps on at 7 s), one at
// 19.5 s once the chief is 20 steps past 190 (t = 28), one at the end never.
TEST(StormRecoveryTest, TimeUntilTheChiefAdvancedPastTheFault) {
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  std::vector<ProgressSample> progress;
  for (int t = 0; t <= 30; ++t) {
    if (t > 20 && t < 26) continue;  // stalled
    progress.push_back({t0 + absl::Seconds(t), 10 * int64_t{t < 26 ? t : t - 5}});
  }
  const std::vector<std::optional<double>> seconds =
      RecoverySeconds({t0 + absl::Seconds(5.5), t0 + absl::Seconds(20.5), t0 + absl::Seconds(29.5)}, progress, 20);
  ASSERT_EQ(seconds.size(), 3u);
  ASSERT_TRUE(seconds[0] && seconds[1]);
  EXPECT_DOUBLE_EQ(*seconds[0], 1.5);    // 50 at 5 s; 70 at 7 s
  EXPECT_DOUBLE_EQ(*seconds[1], 6.5);    // 200 at 20 s; 220 at 27 s
  EXPECT_FALSE(seconds[2].has_value());  // 240 at 29 s; the run ends at 250
}

// A fault that lands before training printed its first step (a slow start
// on a loaded machine) recovers once the chief is `advance` steps past 0:
// it is measured, not lost as "never recovered".
TEST(StormRecoveryTest, AFaultBeforeTheFirstStepCountsFromStepZero) {
  const absl::Time t0 = absl::FromUnixSeconds(1'800'000'000);
  const std::vector<ProgressSample> progress = {
      {t0 + absl::Seconds(8), 0}, {t0 + absl::Seconds(9), 10}, {t0 + absl::Seconds(10), 20}};
  const std::vector<std::optional<double>> seconds = RecoverySeconds({t0 + absl::Seconds(6.5)}, progress, 20);
  ASSERT_EQ(seconds.size(), 1u);
  ASSERT_TRUE(seconds[0].has_value());
  EXPECT_DOUBLE_EQ(*seconds[0], 3.5);  // 20 at 10 s
}

TEST(StormRecoveryTest, QuantilesByNearestRank) {
  EXPECT_EQ(Quantile({}, 0.5), 0);
  EXPECT_EQ(Quantile({3, 1, 2}, 0.5), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(Quantile(hundred, 0.99), 99);
  EXPECT_EQ(Quantile(hundred, 0.5), 50);
  EXPECT_EQ(Quantile({5}, 0.99), 5);
}

}  // namespace
}  // namespace pstrain::storm
