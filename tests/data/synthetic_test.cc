#include "common/data/synthetic.h"

#include "gtest/gtest.h"

namespace pstrain {
namespace {

TEST(SyntheticDatasetTest, ShapesAndRanges) {
  Dataset data = MakeSyntheticDataset(50, {3, 4, 5}, 7, 1);
  EXPECT_TRUE(ValidateDataset(data).ok()) << ValidateDataset(data);
  EXPECT_EQ(data.num_examples, 50);
  EXPECT_EQ(data.images.size(), 50u * 60);
  std::vector<int> seen(7, 0);
  for (int32_t y : data.labels) ++seen[y];
  for (int c = 0; c < 7; ++c) EXPECT_GT(seen[c], 0) << "class " << c << " never drawn";
  float lo = 1, hi = 0;
  for (float x : data.images) {
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  EXPECT_LT(lo, 0.01f);
  EXPECT_GT(hi, 0.99f);
}

TEST(SyntheticDatasetTest, DeterministicPerSeed) {
  Dataset a = MakeSyntheticDataset(20, {1, 3, 3}, 4, 99);
  Dataset b = MakeSyntheticDataset(20, {1, 3, 3}, 4, 99);
  Dataset c = MakeSyntheticDataset(20, {1, 3, 3}, 4, 100);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images, c.images);
  EXPECT_NE(a.labels, c.labels);
}

TEST(SyntheticDatasetTest, EmptyIsValid) {
  Dataset data = MakeSyntheticDataset(0, {1, 2, 2}, 3, 5);
  EXPECT_TRUE(ValidateDataset(data).ok());
  EXPECT_TRUE(data.images.empty());
}

}  // namespace
}  // namespace pstrain
