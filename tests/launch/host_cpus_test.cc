// Emulated hosts' own CPUs: how a machine's CPUs are split among hosts, and
// their list syntax (the one taskset and cpusets read).
#include "tools/launch/host_cpus.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::launch {
namespace {

using ::testing::HasSubstr;

std::vector<std::vector<int>> Split(int hosts, const std::vector<int>& cpus) {
  absl::StatusOr<std::vector<std::vector<int>>> split = SplitCpus(hosts, cpus);
  EXPECT_TRUE(split.ok()) << split.status();
  return split.ok() ? *split : std::vector<std::vector<int>>();
}

TEST(HostCpusTest, EveryHostGetsADisjointRunAsEqualAsPossible) {
  EXPECT_EQ(Split(2, {0, 1}), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(Split(3, {0, 1, 2, 3, 4, 5, 6, 7}), (std::vector<std::vector<int>>{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
  EXPECT_EQ(Split(1, {4, 5}), (std::vector<std::vector<int>>{{4, 5}}));
}

TEST(HostCpusTest, SplitsTheCpusThisProcessMayUseNotTheirNumbers) {
  // A process confined to CPUs 0, 2, 3 and 5 (a cpuset, taskset).
  EXPECT_EQ(Split(2, {0, 2, 3, 5}), (std::vector<std::vector<int>>{{0, 2}, {3, 5}}));
}

TEST(HostCpusTest, FewerCpusThanHostsIsRefusedNamingBothCounts) {
  absl::StatusOr<std::vector<std::vector<int>>> split = SplitCpus(3, {0, 1});
  ASSERT_FALSE(split.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(split.status()));
  EXPECT_THAT(split.status().message(), HasSubstr("3 emulated hosts cannot have CPUs of their own on 2 CPUs"));
  EXPECT_TRUE(absl::IsInvalidArgument(SplitCpus(0, {0, 1}).status()));
}

TEST(HostCpusTest, ListsAreRunsInTasksetSyntax) {
  EXPECT_EQ(CpuListString({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(CpuListString({3}), "3");
  EXPECT_EQ(CpuListString({}), "");
}

TEST(HostCpusTest, ThisProcessMayRunSomewhere) {
  const std::vector<int> cpus = CpusOfThisProcess();
  ASSERT_FALSE(cpus.empty());
  for (size_t i = 1; i < cpus.size(); ++i) EXPECT_LT(cpus[i - 1], cpus[i]);
}

}  // namespace
}  // namespace pstrain::launch
