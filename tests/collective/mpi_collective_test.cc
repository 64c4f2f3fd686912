// The "mpi" collective over Debian's Open MPI. ctest runs this binary as the
// ranks of one mpirun (tests/collective/CMakeLists.txt: -np 2 and -np 4), so
// every rank runs every test; each rank checks its own results and mpirun
// fails the run when any rank fails. Tests that need mpirun skip without it,
// and the one that needs its absence skips under it.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/compression/compression.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// This process's place in mpirun's job; size 0 when not started by mpirun.
struct World {
  int rank = 0;
  int size = 0;
};
World MpiWorld() {
  World w;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank == nullptr || size == nullptr || !absl::SimpleAtoi(rank, &w.rank) || !absl::SimpleAtoi(size, &w.size)) {
    return World{};
  }
  return w;
}

CollectiveOptions OptionsFor(const World& w, absl::Duration timeout = absl::Seconds(60)) {
  CollectiveOptions options;
  options.rank = w.rank;
  options.size = w.size;
  options.prefix = "mpi_collective_test";
  options.timeout = timeout;
  return options;
}

std::unique_ptr<Collective> Join(const CollectiveOptions& options) {
  absl::StatusOr<CollectiveEntry> mpi = CollectiveRegistry().Find("mpi");
  EXPECT_TRUE(mpi.ok()) << mpi.status();
  if (!mpi.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Collective>> c = mpi->create(options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

#define REQUIRE_MPIRUN(world) \
  if ((world).size == 0) GTEST_SKIP() << "not started by mpirun (ctest runs it under mpirun)"

TEST(MpiCollectiveTest, RegisteredAsAHostCollectiveThatMpirunLaunches) {
  absl::StatusOr<CollectiveEntry> mpi = CollectiveRegistry().Find("mpi");
  ASSERT_TRUE(mpi.ok()) << mpi.status();
  EXPECT_TRUE(mpi->host_buffers);
  EXPECT_TRUE(mpi->launched_by_mpirun);
  EXPECT_FALSE(mpi->needs_store);
  EXPECT_TRUE(mpi->create != nullptr);
}

TEST(MpiCollectiveTest, AllReduceSumIsExactOnEveryRank) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  std::unique_ptr<Collective> c = Join(OptionsFor(w));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->rank(), w.rank);
  EXPECT_EQ(c->size(), w.size);
  for (size_t n : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>((w.rank + 1) * 3 + i % 11);
    ASSERT_TRUE(c->AllReduceSum(data.data(), n).ok());
    for (size_t i = 0; i < n; ++i) {
      float expect = 0;
      for (int r = 0; r < w.size; ++r) expect += static_cast<float>((r + 1) * 3 + i % 11);
      ASSERT_EQ(data[i], expect) << "rank " << w.rank << " element " << i << " of " << n;
    }
  }
  EXPECT_TRUE(c->AllReduceSum(nullptr, 0).ok());
}

// 16-bit floats (compression fp16/bf16): MPI has no such type; the
// collective sums them through a user-defined operation. Small integers are
// exact in both.
TEST(MpiCollectiveTest, SixteenBitSumsAndBroadcasts) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  std::unique_ptr<Collective> c = Join(OptionsFor(w));
  ASSERT_NE(c, nullptr);
  for (WireDType dtype : {DT_FLOAT16, DT_BFLOAT16}) {
    const size_t n = 1000;
    std::vector<float> mine(n);
    for (size_t i = 0; i < n; ++i) mine[i] = static_cast<float>((w.rank + 1) * (i % 5)) - 3.0f;
    std::vector<uint16_t> wire(n);
    EncodeFloats(dtype, mine.data(), n, wire.data());
    ASSERT_TRUE(c->AllReduceSumTyped(wire.data(), n, dtype).ok());
    std::vector<float> sum(n);
    DecodeFloats(dtype, wire.data(), n, sum.data());
    for (size_t i = 0; i < n; ++i) {
      float expect = 0;
      for (int r = 0; r < w.size; ++r) expect += static_cast<float>((r + 1) * (i % 5)) - 3.0f;
      ASSERT_EQ(sum[i], expect) << WireDTypeElements(dtype) << " element " << i;
    }
    std::vector<uint16_t> bits(7, w.rank == 0 ? 0x3C00 : 0);
    ASSERT_TRUE(c->BroadcastTyped(bits.data(), bits.size(), dtype, 0).ok());
    EXPECT_THAT(bits, ::testing::Each(0x3C00));
  }
}

TEST(MpiCollectiveTest, BroadcastFromTheLastRankAndBarrier) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  std::unique_ptr<Collective> c = Join(OptionsFor(w));
  ASSERT_NE(c, nullptr);
  const int root = w.size - 1;
  std::vector<float> data(4096, w.rank == root ? 2.5f : -1.0f);
  ASSERT_TRUE(c->Broadcast(data.data(), data.size(), root).ok());
  EXPECT_THAT(data, ::testing::Each(2.5f));
  EXPECT_TRUE(c->Barrier().ok());
  absl::Status bad = c->Broadcast(data.data(), data.size(), w.size);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("out of range"));
}

// Subgroups (what hierarchical all-reduce builds): the first and second half
// of the ranks, each its own communicator, reduce only among themselves.
TEST(MpiCollectiveTest, SubgroupsReduceAmongTheirMembers) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  if (w.size < 2) GTEST_SKIP() << "needs two ranks";
  const int half = w.size / 2;
  const bool first = w.rank < half;
  CollectiveOptions options = OptionsFor(w);
  for (int r = first ? 0 : half; r < (first ? half : w.size); ++r) options.members.push_back(r);
  options.rank = first ? w.rank : w.rank - half;
  options.size = static_cast<int>(options.members.size());
  options.prefix = first ? "first_half" : "second_half";
  std::unique_ptr<Collective> c = Join(options);
  ASSERT_NE(c, nullptr);
  float value = static_cast<float>(w.rank + 1);
  ASSERT_TRUE(c->AllReduceSum(&value, 1).ok());
  float expect = 0;
  for (int m : options.members) expect += static_cast<float>(m + 1);
  EXPECT_EQ(value, expect);
}

TEST(MpiCollectiveTest, ARankThatIsNotTheWorkerIndexIsRefusedWithTheRemedy) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  if (w.size < 2) GTEST_SKIP() << "needs two ranks";
  CollectiveOptions options = OptionsFor(w);
  options.rank = (w.rank + 1) % w.size;
  absl::StatusOr<std::unique_ptr<Collective>> c = CollectiveRegistry().Find("mpi")->create(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(absl::StrCat("mpirun -np ", w.size)));
}

// Run by ctest without mpirun: several workers that were not started by
// mpirun are told how to start them (no single-rank MPI job by accident).
TEST(MpiCollectiveWithoutMpirunTest, SeveralWorkersNotStartedByMpirunAreRefused) {
  if (MpiWorld().size != 0) GTEST_SKIP() << "started by mpirun";
  CollectiveOptions options;
  options.rank = 1;
  options.size = 3;
  options.timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<Collective>> c = CollectiveRegistry().Find("mpi")->create(options);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("was not started by mpirun"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("mpirun -np 3"));
}

// Run by ctest as its own mpirun job that must END (not hang): rank 0 waits
// in an all-reduce that the last rank never joins; the watchdog names the
// operation and aborts the job at the timeout. ctest checks the message.
TEST(MpiCollectiveWatchdogTest, APeerThatNeverJoinsAbortsTheJobNamingTheOperation) {
  const World w = MpiWorld();
  REQUIRE_MPIRUN(w);
  if (w.size < 2) GTEST_SKIP() << "needs two ranks";
  std::unique_ptr<Collective> c = Join(OptionsFor(w, absl::Seconds(2)));
  ASSERT_NE(c, nullptr);
  if (w.rank == w.size - 1) {
    absl::SleepFor(absl::Seconds(60));  // never joins; the job is aborted first
    ADD_FAILURE() << "the job was not aborted";
    return;
  }
  float value = 1;
  (void)c->AllReduceSum(&value, 1);
  ADD_FAILURE() << "the all-reduce returned although a rank never joined";
}

}  // namespace
}  // namespace pstrain
