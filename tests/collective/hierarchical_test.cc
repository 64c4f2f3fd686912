// Hierarchical all-reduce composed over real Gloo rings (ranks as threads of
// this process on loopback), and the host grouping it is built from.
#include "worker/collective/hierarchical.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/collective/loopback_rank.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HostsOfWorkersTest, ConsecutiveWorkersPerHost) {
  absl::StatusOr<std::vector<int>> hosts = HostsOfWorkers({"a:1", "a:2", "b:1", "b:2", "c:1", "c:2"}, 2);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_THAT(*hosts, ElementsAre(0, 0, 1, 1, 2, 2));
}

TEST(HostsOfWorkersTest, FromAddressesInOrderOfFirstAppearance) {
  absl::StatusOr<std::vector<int>> hosts =
      HostsOfWorkers({"10.0.0.2:2222", "10.0.0.1:2222", "10.0.0.2:2223", "10.0.0.1:2223"}, 0);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_THAT(*hosts, ElementsAre(0, 1, 0, 1));
}

TEST(HostsOfWorkersTest, RefusesACountThatDoesNotDivideTheWorkers) {
  absl::StatusOr<std::vector<int>> hosts = HostsOfWorkers({"a:1", "a:2", "a:3"}, 2);
  ASSERT_FALSE(hosts.ok());
  EXPECT_THAT(std::string(hosts.status().message()), HasSubstr("workers_per_host 2 does not divide the 3 workers"));
}

TEST(HostsOfWorkersTest, RefusesAnAddressThatDoesNotParse) { EXPECT_FALSE(HostsOfWorkers({"a:1", "no-port"}, 0).ok()); }

// Runs `fn(rank, collective)` on one thread per worker, each joined to a
// hierarchical Gloo collective with the given host of every worker.
void RunHierarchical(const std::vector<int>& host_of, const std::string& prefix,
                     const std::function<void(int, Collective*)>& fn) {
  const int size = static_cast<int>(host_of.size());
  InMemoryKeyValueStore store;
  const CollectiveEntry gloo = CollectiveRegistry().Find("gloo").value();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      const CollectiveOptions options = test::LoopbackRank(r, size, &store, prefix);
      absl::StatusOr<std::unique_ptr<Collective>> collective = CreateHierarchicalCollective(gloo, options, host_of);
      ASSERT_TRUE(collective.ok()) << "rank " << r << ": " << collective.status();
      EXPECT_EQ((*collective)->rank(), r);
      EXPECT_EQ((*collective)->size(), size);
      fn(r, collective->get());
    });
  }
  for (std::thread& t : threads) t.join();
}

class HierarchicalTest : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(HierarchicalTest, AllReduceSumIsExactOnEveryWorker) {
  const std::vector<int>& host_of = GetParam();
  const int size = static_cast<int>(host_of.size());
  const size_t n = 10007;
  RunHierarchical(host_of, absl::StrCat("hier/sum/", ::testing::UnitTest::GetInstance()->random_seed(), size),
                  [&](int rank, Collective* c) {
                    for (int round = 0; round < 3; ++round) {
                      std::vector<float> data(n);
                      for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((rank + 1) * (round + 1) + i % 13);
                      ASSERT_TRUE(c->AllReduceSum(data.data(), n).ok());
                      for (size_t i = 0; i < n; ++i) {
                        float expect = 0;
                        for (int r = 0; r < size; ++r) expect += static_cast<float>((r + 1) * (round + 1) + i % 13);
                        ASSERT_EQ(data[i], expect) << "rank " << rank << " element " << i;
                      }
                    }
                  });
}

// compression fp16/bf16: each stage sums 16-bit values (small integers are
// exact in both).
TEST_P(HierarchicalTest, SixteenBitSumsAreExactForSmallIntegers) {
  const std::vector<int>& host_of = GetParam();
  const int size = static_cast<int>(host_of.size());
  RunHierarchical(host_of, absl::StrCat("hier/16bit/", size), [&](int rank, Collective* c) {
    for (WireDType dtype : {DT_FLOAT16, DT_BFLOAT16}) {
      const size_t n = 513;
      std::vector<float> mine(n);
      for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(rank + 1) - static_cast<float>(i % 3);
      std::vector<uint16_t> wire(n);
      EncodeFloats(dtype, mine.data(), n, wire.data());
      ASSERT_TRUE(c->AllReduceSumTyped(wire.data(), n, dtype).ok());
      std::vector<float> sum(n);
      DecodeFloats(dtype, wire.data(), n, sum.data());
      for (size_t i = 0; i < n; ++i) {
        float expect = 0;
        for (int r = 0; r < size; ++r) expect += static_cast<float>(r + 1) - static_cast<float>(i % 3);
        ASSERT_EQ(sum[i], expect) << "rank " << rank << " element " << i;
      }
    }
  });
}

TEST_P(HierarchicalTest, BroadcastAndBarrierSpanEveryWorker) {
  const std::vector<int>& host_of = GetParam();
  const int size = static_cast<int>(host_of.size());
  RunHierarchical(host_of, absl::StrCat("hier/bcast/", size), [&](int rank, Collective* c) {
    const int root = size - 1;  // not a host leader in the uneven layouts
    std::vector<float> data(100, rank == root ? 7.5f : -1.0f);
    ASSERT_TRUE(c->Broadcast(data.data(), data.size(), root).ok());
    EXPECT_THAT(data, ::testing::Each(7.5f));
    EXPECT_TRUE(c->Barrier().ok());
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, HierarchicalTest,
                         ::testing::Values(std::vector<int>{0, 0, 1, 1},        // 2 hosts x 2 workers
                                           std::vector<int>{0, 1, 0, 1},        // interleaved
                                           std::vector<int>{0, 0, 1, 2, 2, 2},  // uneven
                                           std::vector<int>{0, 0, 0}),          // one host
                         [](const auto& info) {
                           std::string name = "hosts";
                           for (int h : info.param) name += absl::StrCat("_", h);
                           return name;
                         });

TEST(HierarchicalCreateTest, RefusesADeviceCollectiveAndAMismatchedHostList) {
  CollectiveOptions options;
  options.size = 2;
  const CollectiveEntry device_collective{.host_buffers = false, .create = nullptr};
  EXPECT_THAT(std::string(CreateHierarchicalCollective(device_collective, options, {0, 0}).status().message()),
              HasSubstr("needs a host collective"));
  const CollectiveEntry gloo = CollectiveRegistry().Find("gloo").value();
  EXPECT_THAT(std::string(CreateHierarchicalCollective(gloo, options, {0, 0, 1}).status().message()),
              HasSubstr("3 host entries for 2 workers"));
}

}  // namespace
}  // namespace pstrain
