// The layout tuner's lines in a comparison (tools/compare/tuner_summary.h),
// from synthetic results.
#include "tools/compare/tuner_summary.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::compare {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A PS run of 4 workers x 64 images at time scale 20.
RunResult PsRun(double images_per_sec) {
  RunResult r;
  r.set_num_ps(4);
  r.set_num_workers(4);
  r.set_global_batch_size(256);
  r.set_images_per_sec(images_per_sec);
  r.mutable_emulation()->set_time_scale(20);
  r.add_workers();
  return r;
}

void Decide(RunResult& r, int64_t step, double seconds, const std::string& why, int64_t batch = 2 << 20) {
  LayoutTuning::Decision* d = r.mutable_workers(0)->mutable_layout_tuning()->add_decisions();
  d->set_step(step);
  d->set_run_seconds(seconds);
  d->set_why(why);
  d->set_batch_bytes(batch);
  d->set_pushes_per_shard(1);
}

ReportRow Row(const std::string& label, RunResult r) {
  ReportRow row;
  row.outcome.label = label;
  row.outcome.ok = true;
  row.outcome.result = std::move(r);
  return row;
}

TEST(TunerSummaryTest, NothingWithoutATunedRun) { EXPECT_EQ(TunerSummary({Row("fixed", PsRun(1000))}), ""); }

TEST(TunerSummaryTest, WhereItSettledAgainstTheFastestFixedRunAndEachRetune) {
  RunResult tuned = PsRun(900);
  Decide(tuned, 5, 1.5, "try batch 256 KiB, window none, 1 per shard", 256 << 10);
  Decide(tuned, 35, 10.5, "settled on batch 256 KiB, window none, 1 per shard (5.2 s a step)", 256 << 10);
  Decide(tuned, 150, 45.5, "re-tune: step time 40% off the settled one");
  Decide(tuned, 180, 55.0, "settled on batch 2 MiB, window none, 1 per shard (6.4 s a step)");
  LayoutTuning* t = tuned.mutable_workers(0)->mutable_layout_tuning();
  t->set_settled(true);
  t->set_settled_step_seconds(5.12);  // 256 images x 20 / 5.12 s = 1000 images/sec
  const std::string md =
      TunerSummary({Row("fixed 64 KiB", PsRun(800)), Row("fixed 2 MiB", PsRun(1010)), Row("tuned", tuned)});
  EXPECT_THAT(md, HasSubstr("- **tuned**: 4 decisions; first settled at step 35 (10.5 s) on batch 256 KiB, "
                            "window none, 1 per shard"));
  EXPECT_THAT(md, HasSubstr("at the end 5.12 s a step (1,000 images/sec), 99.0% of the fastest run without a tuner "
                            "(fixed 2 MiB, 1,010)"));
  EXPECT_THAT(md, HasSubstr("re-tuned at step 150 (45.5 s), settled again at step 180, 9.5 s later."));
  EXPECT_THAT(md, Not(HasSubstr("fixed 64 KiB**")));
}

// A tuned run this machine did not keep up with is said to be invalid, as
// its row in the table is: its share of the fastest fixed run does not count.
TEST(TunerSummaryTest, ATunedRunThatWasCpuBoundIsMarkedNotValid) {
  RunResult valid = PsRun(900);
  Decide(valid, 35, 10.5, "settled on batch 64 KiB, window 1 MiB, 1 per shard (5.9 s a step)", 64 << 10);
  RunResult cpu_bound = valid;
  cpu_bound.mutable_emulation()->set_cpu_bound(true);
  cpu_bound.mutable_emulation()->set_cpu_bound_reason("this machine's CPUs were 65% busy");
  const std::string md = TunerSummary({Row("fixed 512 KiB", PsRun(1000)), Row("tuned", cpu_bound)});
  EXPECT_THAT(md, HasSubstr("CPU-bound: not valid (this machine's CPUs were 65% busy)."));
  const std::string valid_md = TunerSummary({Row("fixed 512 KiB", PsRun(1000)), Row("tuned", valid)});
  EXPECT_THAT(valid_md, HasSubstr("first settled at step 35"));
  EXPECT_THAT(valid_md, Not(HasSubstr("CPU-bound")));
}

TEST(TunerSummaryTest, ASearchThatFoundTheLinkChangedCountsAsARetune) {
  RunResult rebased = PsRun(900);
  Decide(rebased, 5, 1.5, "try batch 256 KiB, window none, 1 per shard", 256 << 10);
  Decide(rebased, 10, 3.0, "control: batch 64 KiB, window 1 MiB, 1 per shard again");
  Decide(rebased, 15, 6.0, "re-base: batch 64 KiB, window 1 MiB, 1 per shard now takes 15 s a step");
  Decide(rebased, 40, 16.0, "settled on batch 2 MiB, window none, 1 per shard (15 s a step)");
  const std::string md = TunerSummary({Row("rebased", rebased)});
  EXPECT_THAT(md, HasSubstr("first settled at step 40 (16.0 s)"));
  EXPECT_THAT(md, HasSubstr("re-tuned at step 15 (6.0 s), settled again at step 40, 10.0 s later"));
}

TEST(TunerSummaryTest, ARetuneThatHasNotSettledAndARunThatNeverSettled) {
  RunResult retuning = PsRun(900);
  Decide(retuning, 35, 10.5, "settled on batch 2 MiB, window none, 1 per shard (5 s a step)");
  Decide(retuning, 150, 45.5, "re-tune: step time 40% off the settled one");
  RunResult searching = PsRun(900);
  Decide(searching, 5, 1.5, "try batch 256 KiB, window none, 1 per shard");
  const std::string md = TunerSummary({Row("retuning", retuning), Row("searching", searching)});
  EXPECT_THAT(md, HasSubstr("re-tuning since step 150 (45.5 s), not settled"));
  EXPECT_THAT(md, HasSubstr("- **searching**: 1 decisions; never settled."));
}

}  // namespace
}  // namespace pstrain::compare
