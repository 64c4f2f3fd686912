// What a PS shard does for recovery: generations (a newer Init replaces the
// state in place, requests of other generations are ABORTED, pulls may wait
// for a generation) and workers whose process was restarted (their
// repeated sync gradients are dropped, not refused).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard/shard.h"
#include "tests/ps/ps_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::ps_testing::AddTensor;
using ::pstrain::ps_testing::FloatBytes;
using ::pstrain::ps_testing::PsHarness;
using ::pstrain::ps_testing::PullResult;
using ::pstrain::ps_testing::SgdOptions;
using ::pstrain::ps_testing::Var;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const Var kA = {"a", {2}, {1.0f, 2.0f}};
const Var kGa0 = {"a", {2}, {0.5f, -1.0f}};
const Var kGa1 = {"a", {2}, {1.5f, 3.0f}};

InitRequest InitOf(const Var& var, int64_t generation) {
  InitRequest header;
  header.set_worker(0);
  header.set_generation(generation);
  AddTensor(header.add_tensors(), var.name, var.shape, var.values.size() * sizeof(float));
  return header;
}

PullRequest PullOf(int worker, int64_t generation, int64_t min_generation = 0, uint64_t incarnation = 0) {
  PullRequest header = PsHarness::PullHeader({"a"}, 0, 5000, worker);
  header.set_generation(generation);
  header.set_min_generation(min_generation);
  header.set_incarnation(incarnation);
  return header;
}

PushRequest PushOf(int worker, int64_t step, const Var& grad, int64_t generation, uint64_t incarnation = 0) {
  PushRequest header;
  header.set_worker(worker);
  header.set_step(step);
  header.set_generation(generation);
  header.set_incarnation(incarnation);
  AddTensor(header.add_tensors(), grad.name, grad.shape, grad.values.size() * sizeof(float));
  return header;
}

PullResponse HeaderOf(const PullResult& r) {
  PullResponse header;
  EXPECT_TRUE(header.ParseFromString(r.header));
  return header;
}

// A sync shard of two workers at generation 1, after one applied step.
class ShardGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ps_.ok());
    absl::StatusOr<InitResponse> init = ps_.InitRaw(InitOf(kA, 1), FloatBytes(kA.values));
    ASSERT_TRUE(init.ok()) << init.status();
    EXPECT_EQ(init->generation(), 1);
    ASSERT_TRUE(ps_.PushRaw(PushOf(0, 0, kGa0, 1), FloatBytes(kGa0.values)).ok());
    ASSERT_TRUE(ps_.PushRaw(PushOf(1, 0, kGa1, 1), FloatBytes(kGa1.values)).ok());
    PullResult r = ps_.PullRaw(PullOf(0, 1));
    ASSERT_TRUE(r.status.ok()) << r.status;
    ASSERT_THAT(r.versions, ElementsAre(1));
  }

  PsHarness ps_{SgdOptions(2, "sync", 0.5f)};
};

TEST_F(ShardGenerationTest, ANewerGenerationReplacesValuesAndVersionsInPlace) {
  const std::vector<float> restored = {10.0f, 20.0f};
  absl::StatusOr<InitResponse> again = ps_.InitRaw(InitOf(kA, 2), FloatBytes(restored));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_initialized());
  EXPECT_EQ(again->generation(), 2);

  PullResult r = ps_.PullRaw(PullOf(0, 2));
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_THAT(r.versions, ElementsAre(0));
  EXPECT_EQ(r.values["a"], restored);
  EXPECT_EQ(HeaderOf(r).generation(), 2);
  absl::StatusOr<StatsResponse> stats = ps_.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->generation(), 2);

  // The sync state was reset too: one gradient per worker makes step 0 again.
  ASSERT_TRUE(ps_.PushRaw(PushOf(0, 0, kGa0, 2), FloatBytes(kGa0.values)).ok());
  ASSERT_TRUE(ps_.PushRaw(PushOf(1, 0, kGa1, 2), FloatBytes(kGa1.values)).ok());
  PullResult stepped = ps_.PullRaw(PullOf(0, 2));
  EXPECT_THAT(stepped.versions, ElementsAre(1));
  EXPECT_FLOAT_EQ(stepped.values["a"][0], 10.0f - 0.5f * (0.5f + 1.5f) / 2);
}

TEST_F(ShardGenerationTest, InitOfTheSameOrAnOlderGenerationChangesNothing) {
  const std::string before = ps_.Snapshot();
  for (int64_t generation : {0, 1}) {
    absl::StatusOr<InitResponse> retry = ps_.InitRaw(InitOf(kA, generation), FloatBytes({7.0f, 7.0f}));
    ASSERT_TRUE(retry.ok()) << retry.status();
    EXPECT_TRUE(retry->already_initialized());
    EXPECT_EQ(retry->generation(), 1);
  }
  EXPECT_EQ(ps_.Snapshot(), before);
}

TEST_F(ShardGenerationTest, RequestsOfTheOldGenerationAreAbortedIncludingParkedPulls) {
  // Parked: waits for a version the old generation would have reached.
  PullRequest waiting = PullOf(1, 1);
  waiting.set_min_version(5);
  auto parked = ps_.PullAsyncRaw(waiting);
  EXPECT_FALSE(parked->done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));

  ASSERT_TRUE(ps_.InitRaw(InitOf(kA, 2), FloatBytes(kA.values)).ok());
  ASSERT_TRUE(parked->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(parked->result.status.code(), absl::StatusCode::kAborted) << parked->result.status;
  EXPECT_THAT(parked->result.status.message(), HasSubstr("was restored (generation 2)"));

  const std::string before = ps_.Snapshot();
  absl::StatusOr<PushResponse> push = ps_.PushRaw(PushOf(0, 0, kGa0, 1), FloatBytes(kGa0.values));
  EXPECT_EQ(push.status().code(), absl::StatusCode::kAborted) << push.status();
  EXPECT_THAT(push.status().message(), HasSubstr("this request is of generation 1"));
  EXPECT_EQ(ps_.PullRaw(PullOf(0, 1)).status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ps_.Snapshot(), before) << "an aborted push changed the shard";
}

TEST_F(ShardGenerationTest, APullWaitsForTheGenerationItAsksFor) {
  auto joining = ps_.PullAsyncRaw(PullOf(1, /*generation=*/0, /*min_generation=*/2));
  EXPECT_FALSE(joining->done.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  ASSERT_TRUE(ps_.InitRaw(InitOf(kA, 2), FloatBytes({3.0f, 4.0f})).ok());
  ASSERT_TRUE(joining->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(joining->result.status.ok()) << joining->result.status;
  EXPECT_EQ(HeaderOf(joining->result).generation(), 2);
  EXPECT_EQ(joining->result.values["a"], std::vector<float>({3.0f, 4.0f}));
}

TEST(ShardRestartTest, ARestartedShardAbortsRequestsOfTheRunningGeneration) {
  PsHarness ps(SgdOptions(2, "sync", 0.5f));
  ASSERT_TRUE(ps.ok());
  absl::StatusOr<PushResponse> push = ps.PushRaw(PushOf(0, 3, kGa0, 4), FloatBytes(kGa0.values));
  EXPECT_EQ(push.status().code(), absl::StatusCode::kAborted) << push.status();
  EXPECT_THAT(push.status().message(), HasSubstr("has restarted and holds no variables"));
  EXPECT_EQ(ps.PullRaw(PullOf(0, 4)).status.code(), absl::StatusCode::kAborted);
  // Without a generation (a worker joining) the pull waits for Init, as at
  // the start of a run.
  auto joining = ps.PullAsyncRaw(PullOf(1, 0, 1));
  EXPECT_FALSE(joining->done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  ASSERT_TRUE(ps.InitRaw(InitOf(kA, 5), FloatBytes(kA.values)).ok());
  ASSERT_TRUE(joining->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(joining->result.status.ok()) << joining->result.status;
  EXPECT_EQ(HeaderOf(joining->result).generation(), 5);
}

TEST(ShardRejoinTest, ARestartedWorkersRepeatedGradientIsDroppedAndCountedOnce) {
  const float lr = 0.5f;
  PsHarness ps(SgdOptions(2, "sync", lr));
  ASSERT_TRUE(ps.ok());
  ASSERT_TRUE(ps.InitRaw(InitOf(kA, 1), FloatBytes(kA.values)).ok());
  // Worker 1's first process pushes step 0, then dies.
  ASSERT_TRUE(ps.PushRaw(PushOf(1, 0, kGa1, 1, /*incarnation=*/111), FloatBytes(kGa1.values)).ok());
  // A repeat from the same process is still a malformed duplicate.
  EXPECT_EQ(ps.PushRaw(PushOf(1, 0, kGa1, 1, 111), FloatBytes(kGa1.values)).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Its new process joins: the shard says it rejoined.
  PullResult joined = ps.PullRaw(PullOf(1, 0, 1, /*incarnation=*/222));
  ASSERT_TRUE(joined.status.ok()) << joined.status;
  EXPECT_TRUE(HeaderOf(joined).rejoined());
  EXPECT_THAT(joined.versions, ElementsAre(0));
  // It trains step 0 again: the repeat is dropped, not refused.
  absl::StatusOr<PushResponse> repeat = ps.PushRaw(PushOf(1, 0, kGa1, 1, 222), FloatBytes(kGa1.values));
  ASSERT_TRUE(repeat.ok()) << repeat.status();
  EXPECT_EQ(repeat->accepted(), 0);
  EXPECT_EQ(repeat->dropped_stale(), 1);

  ASSERT_TRUE(ps.PushRaw(PushOf(0, 0, kGa0, 1, 333), FloatBytes(kGa0.values)).ok());
  PullResult r = ps.PullRaw(PullOf(0, 1));
  ASSERT_THAT(r.versions, ElementsAre(1));
  // The mean of one gradient per worker: the repeat was not added.
  EXPECT_FLOAT_EQ(r.values["a"][0], 1.0f - lr * (0.5f + 1.5f) / 2);
  EXPECT_FLOAT_EQ(r.values["a"][1], 2.0f - lr * (-1.0f + 3.0f) / 2);
  PullResult chief = ps.PullRaw(PullOf(0, 0, 1, 333));
  ASSERT_TRUE(chief.status.ok()) << chief.status;
  EXPECT_FALSE(HeaderOf(chief).rejoined());  // worker 0 never restarted
}

}  // namespace
}  // namespace pstrain
