// Variable -> PS shard placement (common/placement.h).
#include "common/placement.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<VariableSize> Sizes(const std::vector<int64_t>& bytes) {
  std::vector<VariableSize> vars;
  for (size_t i = 0; i < bytes.size(); ++i) vars.push_back({"v" + std::to_string(i), bytes[i]});
  return vars;
}

TEST(PlacementTest, RoundRobin) {
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(Sizes({5, 1, 1000, 7, 3, 3, 9}), 3, "round_robin");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, ElementsAre(0, 1, 2, 0, 1, 2, 0));
  EXPECT_THAT(ShardBytes(Sizes({5, 1, 1000, 7, 3, 3, 9}), *plan, 3), ElementsAre(21, 4, 1003));
}

TEST(PlacementTest, RoundRobinMoreShardsThanVariables) {
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(Sizes({5, 6}), 4, "round_robin");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(*plan, ElementsAre(0, 1));
  EXPECT_THAT(ShardBytes(Sizes({5, 6}), *plan, 4), ElementsAre(5, 6, 0, 0));
}

TEST(PlacementTest, GreedyLargestFirstOntoLeastLoaded) {
  // Sorted: 100 -> s0 (100,0); 60 -> s1 (100,60); 50 -> s1 (100,110);
  // 40 -> s0 (140,110); 10 -> s1 (140,120).
  const auto vars = Sizes({100, 60, 50, 40, 10});
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(vars, 2, "greedy");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, ElementsAre(0, 1, 1, 0, 1));
  EXPECT_THAT(ShardBytes(vars, *plan, 2), ElementsAre(140, 120));
}

TEST(PlacementTest, GreedyIndependentOfModelOrderForDistinctSizes) {
  // Same sizes in another model order: same bytes per shard.
  const auto vars = Sizes({10, 40, 100, 50, 60});
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(vars, 2, "greedy");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(*plan, ElementsAre(1, 0, 0, 1, 1));
  EXPECT_THAT(ShardBytes(vars, *plan, 2), ElementsAre(140, 120));
}

TEST(PlacementTest, GreedyTiesGoToLowestShardThenModelOrder) {
  const auto vars = Sizes({10, 10, 10, 10, 10});
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(vars, 3, "greedy");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(*plan, ElementsAre(0, 1, 2, 0, 1));
}

TEST(PlacementTest, GreedyThreeShards) {
  // 9 -> s0; 8 -> s1; 7 -> s2; 6 -> s2 (9,8,13); 5 -> s1 (9,13,13); 4 -> s0 (13,13,13).
  const auto vars = Sizes({4, 9, 6, 8, 5, 7});
  absl::StatusOr<std::vector<int>> plan = PlaceVariables(vars, 3, "greedy");
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(*plan, ElementsAre(0, 0, 2, 1, 1, 2));
  EXPECT_THAT(ShardBytes(vars, *plan, 3), ElementsAre(13, 13, 13));
}

TEST(PlacementTest, Deterministic) {
  std::vector<int64_t> bytes;
  for (int i = 0; i < 200; ++i) bytes.push_back((i * 7919) % 1000 + (i % 3 == 0 ? 1000 : 0));
  const auto vars = Sizes(bytes);
  for (const char* policy : {"round_robin", "greedy"}) {
    absl::StatusOr<std::vector<int>> first = PlaceVariables(vars, 5, policy);
    ASSERT_TRUE(first.ok());
    for (int k = 0; k < 5; ++k) {
      absl::StatusOr<std::vector<int>> again = PlaceVariables(vars, 5, policy);
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(*again, *first) << policy;
    }
    for (int s : *first) {
      EXPECT_GE(s, 0);
      EXPECT_LT(s, 5);
    }
  }
}

TEST(PlacementTest, GreedyBalancesBetterThanRoundRobinHere) {
  const auto vars = Sizes({1000, 1, 1000, 1, 1000, 1});
  absl::StatusOr<std::vector<int>> greedy = PlaceVariables(vars, 2, "greedy");
  ASSERT_TRUE(greedy.ok());
  std::vector<int64_t> bytes = ShardBytes(vars, *greedy, 2);
  EXPECT_THAT(bytes, ElementsAre(2000, 1003));
}

TEST(PlacementTest, EmptyModel) {
  absl::StatusOr<std::vector<int>> plan = PlaceVariables({}, 2, "greedy");
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->empty());
}

TEST(PlacementTest, Errors) {
  absl::StatusOr<std::vector<int>> bad = PlaceVariables(Sizes({1, 2}), 2, "random");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(bad.status().message());
  EXPECT_THAT(message, HasSubstr("random"));
  EXPECT_THAT(message, HasSubstr("round_robin"));
  EXPECT_THAT(message, HasSubstr("greedy"));
  EXPECT_FALSE(PlaceVariables(Sizes({1, 2}), 0, "greedy").ok());
  EXPECT_FALSE(PlaceVariables(Sizes({1, 2}), -1, "round_robin").ok());
}

}  // namespace
}  // namespace pstrain
