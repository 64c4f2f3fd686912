#include "common/placement.h"

#include <algorithm>
#include <numeric>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

std::vector<VariableShape> Shapes(const std::vector<int64_t>& elements) {
  std::vector<VariableShape> v;
  for (size_t i = 0; i < elements.size(); ++i) v.push_back({"v" + std::to_string(i), Shape{elements[i]}});
  return v;
}

TEST(PlanPlacementTest, PartitionedSplitsLargeVariablesEvenlyAndCoversEveryElement) {
  // One 1000-float variable (4000 bytes) above the 1 KB threshold, three small ones.
  auto parts = PlanPlacement(Shapes({10, 1000, 20, 30}), 3, "partitioned", 1024);
  ASSERT_TRUE(parts.ok()) << parts.status();
  std::vector<int64_t> covered(4, 0);
  int split_parts = 0;
  for (const VariablePart& p : *parts) {
    covered[p.variable] += p.count;
    if (p.variable == 1) {
      ++split_parts;
      EXPECT_EQ(p.name, "v1/part_" + std::to_string(p.shard));
      EXPECT_EQ(p.shape, Shape{p.count});
      EXPECT_NEAR(p.count, 1000.0 / 3, 1.0);
    } else {
      EXPECT_EQ(p.name, "v" + std::to_string(p.variable));
      EXPECT_EQ(p.offset, 0);
    }
  }
  EXPECT_EQ(split_parts, 3);
  EXPECT_EQ(covered, std::vector<int64_t>({10, 1000, 20, 30}));
  // Offsets of the split variable tile it exactly, in order.
  int64_t next = 0;
  for (const VariablePart& p : *parts) {
    if (p.variable != 1) continue;
    EXPECT_EQ(p.offset, next);
    next += p.count;
  }
}

TEST(PlanPlacementTest, PartitionedBalancesBetterThanGreedyWithOneHugeVariable) {
  // A VGG-like mix: one dominant variable.
  std::vector<int64_t> sizes = {100000000, 16000000, 4000000, 2000000, 500000, 100};
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) * 4;
  auto largest_share = [&](const std::string& policy) {
    auto parts = PlanPlacement(Shapes(sizes), 4, policy, 8 << 20);
    EXPECT_TRUE(parts.ok());
    std::vector<int64_t> bytes = ShardBytes(*parts, 4);
    return static_cast<double>(*std::max_element(bytes.begin(), bytes.end())) / total;
  };
  EXPECT_GT(largest_share("greedy"), 0.8);
  EXPECT_GT(largest_share("round_robin"), 0.8);
  EXPECT_LT(largest_share("partitioned"), 0.30);
}

// BytePS: slices of at most partition_bytes, spread so that no shard holds
// more than one slice above its share, whatever the model.
TEST(PlanPlacementTest, BalancedSlicesEveryLargeVariableAndEvensTheLoad) {
  std::vector<int64_t> sizes = {100000000, 16000000, 4000000, 2000000, 500000, 100};
  const int64_t slice_bytes = 4 << 20;
  auto parts = PlanPlacement(Shapes(sizes), 4, "balanced", slice_bytes);
  ASSERT_TRUE(parts.ok()) << parts.status();
  std::vector<int64_t> covered(sizes.size(), 0), next(sizes.size(), 0);
  for (const VariablePart& p : *parts) {
    EXPECT_LE(p.count * 4, slice_bytes) << p.name;
    EXPECT_EQ(p.offset, next[p.variable]) << p.name << ": slices tile their variable in order";
    next[p.variable] += p.count;
    covered[p.variable] += p.count;
    if (sizes[p.variable] * 4 > slice_bytes) {
      EXPECT_EQ(p.name.rfind("v" + std::to_string(p.variable) + "/slice_", 0), 0u) << p.name;
    } else {
      EXPECT_EQ(p.name, "v" + std::to_string(p.variable));
    }
  }
  EXPECT_EQ(covered, sizes);
  const std::vector<int64_t> bytes = ShardBytes(*parts, 4);
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) * 4;
  for (int64_t b : bytes) EXPECT_LE(b, total / 4 + slice_bytes);
  // Deterministic: every role computes the same plan.
  auto again = PlanPlacement(Shapes(sizes), 4, "balanced", slice_bytes);
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < parts->size(); ++i) EXPECT_EQ((*parts)[i].shard, (*again)[i].shard);
  EXPECT_FALSE(PlanPlacement(Shapes(sizes), 4, "balanced", -1).ok());
}

// partition_bytes 0 (the default): slices of a quarter of a shard's share,
// within [64 KiB, 8 MiB], so the demo MLP's one large layer is cut and its
// two shards carry within 2x of each other (greedy: 22x).
TEST(PlanPlacementTest, AutoPartitionsCutASmallModelsLargeLayerAndEvenTheShards) {
  const std::vector<int64_t> mlp = {784 * 128, 128, 128 * 32, 32, 32 * 10, 10};
  auto parts = PlanPlacement(Shapes(mlp), 2, "balanced", 0);
  ASSERT_TRUE(parts.ok()) << parts.status();
  const std::vector<int64_t> bytes = ShardBytes(*parts, 2);
  const double mean = (bytes[0] + bytes[1]) / 2.0;
  for (int64_t b : bytes) {
    EXPECT_GE(b, 0.5 * mean);
    EXPECT_LE(b, 2 * mean);
  }
  EXPECT_LT(std::max(bytes[0], bytes[1]), 1.25 * std::min(bytes[0], bytes[1]));
  auto greedy = PlanPlacement(Shapes(mlp), 2, "greedy", 0);
  ASSERT_TRUE(greedy.ok());
  const std::vector<int64_t> greedy_bytes = ShardBytes(*greedy, 2);
  EXPECT_GT(std::max(greedy_bytes[0], greedy_bytes[1]), 20 * std::min(greedy_bytes[0], greedy_bytes[1]));
  EXPECT_EQ(AutoPartitionBytes(Shapes(mlp), 2), kSmallestAutoPartition);  // 421 KB / 8 is under it
  EXPECT_EQ(AutoPartitionBytes(Shapes(mlp), 1), kLargestAutoPartition);
  EXPECT_EQ(AutoPartitionBytes(Shapes({25'000'000}), 4), 6'250'000);  // 100 MB / 16
  EXPECT_EQ(AutoPartitionBytes(Shapes({25'000'000}), 2), kLargestAutoPartition);
}

TEST(PlanPlacementTest, WholeVariablePoliciesMatchPlaceVariables) {
  auto parts = PlanPlacement(Shapes({5, 50, 500}), 2, "greedy", 1);
  ASSERT_TRUE(parts.ok());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[2].shard, 0);  // largest first onto shard 0
  EXPECT_EQ((*parts)[1].shard, 1);
  EXPECT_EQ((*parts)[0].shard, 1);
  EXPECT_FALSE(PlanPlacement(Shapes({5}), 2, "partitioned", -1).ok());
  EXPECT_FALSE(PlanPlacement(Shapes({5}), 2, "random", 1).ok());
}

}  // namespace
}  // namespace pstrain
