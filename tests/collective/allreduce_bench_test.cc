// The all-reduce benchmark hook: sane figures, busbw = algbw * 2(n-1)/n.
// No speed thresholds (a shared machine).
#include "worker/collective/allreduce_bench.h"

#include <cmath>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(AllReduceBenchTest, TwoRanksGiveSaneFigures) {
  absl::StatusOr<AllReduceBenchResult> r = RunAllReduceBench(2, int64_t{1} << 20, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ranks, 2);
  EXPECT_EQ(r->bytes, int64_t{1} << 20);
  EXPECT_EQ(r->iterations, 5);
  for (double v : {r->seconds, r->seconds_per_call, r->algbw_gbps, r->busbw_gbps, r->memcpy_gbps,
                   r->busbw_to_memcpy}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
  EXPECT_DOUBLE_EQ(r->seconds_per_call, r->seconds / 5);
  EXPECT_DOUBLE_EQ(r->algbw_gbps, (1 << 20) / r->seconds_per_call / 1e9);
  EXPECT_DOUBLE_EQ(r->busbw_gbps, r->algbw_gbps);  // 2 (n-1)/n = 1 for two ranks
  EXPECT_DOUBLE_EQ(r->busbw_to_memcpy, r->busbw_gbps / r->memcpy_gbps);
}

TEST(AllReduceBenchTest, ThreeRanksBusBandwidthFactor) {
  absl::StatusOr<AllReduceBenchResult> r = RunAllReduceBench(3, 3 * 4096, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->busbw_gbps, r->algbw_gbps * 4.0 / 3.0, 1e-9 * r->algbw_gbps);
}

TEST(AllReduceBenchTest, BadArguments) {
  EXPECT_TRUE(absl::IsInvalidArgument(RunAllReduceBench(0, 1024, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(RunAllReduceBench(2, 1023, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(RunAllReduceBench(2, 1024, 0).status()));
}

}  // namespace
}  // namespace pstrain
