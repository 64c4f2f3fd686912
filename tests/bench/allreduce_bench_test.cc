// The all-reduce benchmark hook: sane figures, busbw = algbw * 2(n-1)/n.
// No speed thresholds (a shared machine).
#include "tools/bench/allreduce_bench.h"

#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(AllReduceBenchTest, TwoRanksGiveSaneFigures) {
  absl::StatusOr<AllReduceBenchResult> r = RunAllReduceBench(2, int64_t{1} << 20, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ranks, 2);
  EXPECT_EQ(r->bytes, int64_t{1} << 20);
  EXPECT_EQ(r->iterations, 5);
  for (double v : {r->seconds, r->seconds_per_call, r->algbw_gbps, r->busbw_gbps, r->memcpy_gbps, r->busbw_to_memcpy}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
  EXPECT_DOUBLE_EQ(r->seconds_per_call, r->seconds / 5);
  EXPECT_DOUBLE_EQ(r->algbw_gbps, (1 << 20) / r->seconds_per_call / 1e9);
  EXPECT_DOUBLE_EQ(r->busbw_gbps, r->algbw_gbps);  // 2 (n-1)/n = 1 for two ranks
  EXPECT_DOUBLE_EQ(r->busbw_to_memcpy, r->busbw_gbps / r->memcpy_gbps);
  EXPECT_EQ(r->memcpy_buffer_bytes, int64_t{64} << 20);
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

// Figures for a human (until `pstrain-bench allreduce` exists):
//   allreduce_bench_test --gtest_also_run_disabled_tests --gtest_filter='*PrintFigures'
TEST(AllReduceBenchTest, DISABLED_PrintFigures) {
  for (int ranks : {2, 3}) {
    for (int64_t mib : {4, 64}) {
      const int iterations = mib >= 64 ? 10 : 50;
      absl::StatusOr<AllReduceBenchResult> r = RunAllReduceBench(ranks, mib << 20, iterations);
      ASSERT_TRUE(r.ok()) << r.status();
      std::printf(
          "allreduce ranks=%d bytes=%lld MiB iters=%d  %.3f ms/call  algbw %.2f GB/s  busbw %.2f GB/s  "
          "memcpy %.2f GB/s  busbw/memcpy %.3f\n",
          r->ranks, static_cast<long long>(mib), r->iterations, r->seconds_per_call * 1e3, r->algbw_gbps, r->busbw_gbps,
          r->memcpy_gbps, r->busbw_to_memcpy);
    }
  }
}

}  // namespace
}  // namespace pstrain
