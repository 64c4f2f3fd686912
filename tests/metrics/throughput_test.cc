#include "common/metrics/throughput.h"

#include <cmath>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(ThroughputTrackerTest, ZeroBeforeAnyMeasuredStep) {
  ThroughputTracker t(/*batch_size=*/64, /*warmup_steps=*/2);
  EXPECT_EQ(t.ProgressLine(0, 2.5), "1\timages/sec: 0.0 +/- 0.0 (jitter = 0.0)\t2.500");
  t.RecordStep(0, 0.5);
  t.RecordStep(1, 0.5);
  EXPECT_EQ(t.num_measured_steps(), 0);
  EXPECT_EQ(t.mean_images_per_sec(), 0);
  EXPECT_EQ(t.jitter(), 0);
  EXPECT_EQ(t.ProgressLine(1, 2.25), "2\timages/sec: 0.0 +/- 0.0 (jitter = 0.0)\t2.250");
}

TEST(ThroughputTrackerTest, StatisticsMatchNumpy) {
  // Speeds 100, 200, 400, 800 images/sec (batch 100).
  ThroughputTracker t(100, 1);
  t.RecordStep(0, 100.0);  // Warm-up: ignored, would wreck the mean.
  t.RecordStep(1, 1.0);
  t.RecordStep(2, 0.5);
  t.RecordStep(3, 0.25);
  t.RecordStep(4, 0.125);
  EXPECT_EQ(t.num_measured_steps(), 4);
  // numpy: mean 375, std (ddof=0) sqrt(((-275)^2 + (-175)^2 + 25^2 + 425^2)/4) = 268.095...
  EXPECT_DOUBLE_EQ(t.mean_images_per_sec(), 375.0);
  const double sd = std::sqrt((275.0 * 275 + 175.0 * 175 + 25.0 * 25 + 425.0 * 425) / 4);
  EXPECT_DOUBLE_EQ(t.stddev(), sd);
  EXPECT_DOUBLE_EQ(t.uncertainty(), sd / 2);
  // median 300; |dev| = 200, 100, 100, 500 -> median 150; jitter 1.4826 * 150.
  EXPECT_DOUBLE_EQ(t.jitter(), 1.4826 * 150);
  // 400 images in 1.875 s.
  EXPECT_DOUBLE_EQ(t.aggregate_images_per_sec(), 400 / 1.875);
  EXPECT_EQ(t.ProgressLine(4, 0.123456), "5\timages/sec: 375.0 +/- 134.0 (jitter = 222.4)\t0.123");
}

TEST(ThroughputTrackerTest, OddCountMedianAndSteadySpeed) {
  ThroughputTracker t(10, 0);
  for (int i = 0; i < 5; ++i) t.RecordStep(i, 0.1);
  EXPECT_NEAR(t.mean_images_per_sec(), 100.0, 1e-9);
  EXPECT_NEAR(t.stddev(), 0.0, 1e-9);
  EXPECT_NEAR(t.jitter(), 0.0, 1e-9);
  t.RecordStep(5, 0.05);  // One fast outlier barely moves the jitter (a robust statistic).
  EXPECT_NEAR(t.jitter(), 0.0, 1e-9);
  EXPECT_GT(t.stddev(), 30.0);
}

TEST(ThroughputTrackerDeathTest, NonPositiveTimeDies) {
  ThroughputTracker t(10, 0);
  EXPECT_DEATH(t.RecordStep(0, 0.0), "took 0");
}

}  // namespace
}  // namespace pstrain
