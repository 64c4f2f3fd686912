// Tensor fusion: the bucket plan, the readiness tracker, and the fused
// all-reduce of host gradients over real Gloo rings (ranks as threads of this
// process on loopback, meeting through an in-memory store).
#include "worker/fusion.h"

#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"
#include "worker/fused_allreduce.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ---- FusionPlan ----

TEST(FusionPlanTest, BucketsFollowBackwardOrderUpToTheThreshold) {
  // Four variables of 10, 20, 30, 40 floats; 200 bytes hold 50 floats.
  const FusionPlan plan = FusionPlan::Make({10, 20, 30, 40}, 200);
  // Backward produces variable 3 first: 40 alone (40+30 > 50), then 30+20
  // (exactly 50), then 10.
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_THAT(plan.buckets[0], ElementsAre(3));
  EXPECT_THAT(plan.buckets[1], ElementsAre(2, 1));
  EXPECT_THAT(plan.buckets[2], ElementsAre(0));
  EXPECT_THAT(plan.bucket_elements, ElementsAre(40, 50, 10));
  EXPECT_EQ(plan.largest_bucket_elements, 50);
  // Inside a bucket, variables lie in ascending order: 1 before 2.
  EXPECT_EQ(plan.offset_in_bucket[1], 0);
  EXPECT_EQ(plan.offset_in_bucket[2], 20);
  EXPECT_EQ(plan.offset_in_bucket[3], 0);
  EXPECT_EQ(plan.offset_in_bucket[0], 0);
}

TEST(FusionPlanTest, ZeroThresholdGivesEveryVariableItsOwnBucket) {
  const FusionPlan plan = FusionPlan::Make({5, 6, 7}, 0);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_THAT(plan.buckets[0], ElementsAre(2));
  EXPECT_THAT(plan.buckets[2], ElementsAre(0));
}

TEST(FusionPlanTest, AVariableAboveTheThresholdGetsABucketOfItsOwn) {
  const FusionPlan plan = FusionPlan::Make({1, 1000, 1}, 16);
  ASSERT_EQ(plan.buckets.size(), 3u);
  EXPECT_THAT(plan.buckets[1], ElementsAre(1));
  EXPECT_EQ(plan.bucket_elements[1], 1000);
}

TEST(FusionPlanTest, EveryVariableIsInExactlyOneBucket) {
  std::vector<int64_t> sizes;
  for (int v = 0; v < 37; ++v) sizes.push_back(1 + (v * 7919) % 301);
  const FusionPlan plan = FusionPlan::Make(sizes, 1024);
  std::vector<int> seen(sizes.size(), 0);
  int64_t total = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    int64_t elements = 0;
    for (int v : plan.buckets[b]) {
      ++seen[v];
      elements += sizes[v];
    }
    EXPECT_EQ(elements, plan.bucket_elements[b]);
    total += elements;
  }
  EXPECT_THAT(seen, ::testing::Each(1));
  int64_t expected = 0;
  for (int64_t s : sizes) expected += s;
  EXPECT_EQ(total, expected);
}

// ---- BucketTracker ----

TEST(BucketTrackerTest, ABucketIsReadyOnlyWhenEveryReplicaFinalisedAllOfIt) {
  const FusionPlan plan = FusionPlan::Make({4, 4, 4}, 32);  // buckets {2, 1}, {0}
  ASSERT_EQ(plan.buckets.size(), 2u);
  BucketTracker tracker(&plan, /*replicas=*/2);
  EXPECT_EQ(tracker.NextReady(), -1);
  tracker.MarkReady(2);
  tracker.MarkReady(1);
  EXPECT_EQ(tracker.NextReady(), -1) << "only one replica is done";
  tracker.MarkReady(2);
  tracker.MarkReady(1);
  EXPECT_EQ(tracker.NextReady(), 0);
  tracker.Advance();
  EXPECT_EQ(tracker.NextReady(), -1);
  EXPECT_FALSE(tracker.AllTaken());
  tracker.MarkAllReady();
  EXPECT_EQ(tracker.NextReady(), 1);
  tracker.Advance();
  EXPECT_TRUE(tracker.AllTaken());
  EXPECT_EQ(tracker.NextReady(), -1);
}

TEST(BucketTrackerTest, BucketsAreHandedOutInPlanOrderEvenWhenALaterOneIsReadyFirst) {
  const FusionPlan plan = FusionPlan::Make({4, 4}, 0);  // buckets {1}, {0}
  BucketTracker tracker(&plan, 1);
  tracker.MarkReady(0);  // the second bucket
  EXPECT_EQ(tracker.NextReady(), -1) << "every rank must reduce in the same order";
  tracker.MarkReady(1);
  EXPECT_EQ(tracker.NextReady(), 0);
}

TEST(BucketTrackerTest, ResetStartsANewStep) {
  const FusionPlan plan = FusionPlan::Make({4}, 0);
  BucketTracker tracker(&plan, 1);
  tracker.MarkAllReady();
  tracker.Advance();
  EXPECT_TRUE(tracker.AllTaken());
  tracker.Reset();
  EXPECT_FALSE(tracker.AllTaken());
  EXPECT_EQ(tracker.NextReady(), -1);
}

// ---- FusedAllReducer over Gloo ----

// One worker's replicas' gradients: `variables` sizes, either adjacent in one
// buffer (as a model lays them out) or each in its own allocation.
struct WorkerGradients {
  std::vector<std::vector<Tensor>> replicas;
};

WorkerGradients MakeGradients(const std::vector<int64_t>& sizes, int replicas, bool adjacent) {
  WorkerGradients out;
  for (int r = 0; r < replicas; ++r) {
    out.replicas.emplace_back();
    if (adjacent) {
      int64_t total = 0;
      for (int64_t n : sizes) total += n;
      Tensor arena({total});
      int64_t offset = 0;
      for (int64_t n : sizes) {
        out.replicas.back().emplace_back(
            Shape{n}, DType::kFloat32,
            Buffer::Borrow(arena.data() + offset, static_cast<size_t>(n) * sizeof(float), arena.buffer()));
        offset += n;
      }
    } else {
      for (int64_t n : sizes) out.replicas.back().push_back(Tensor(Shape{n}));
    }
  }
  return out;
}

// The gradient element replica r of worker w holds at (v, i) in step s.
float Grad(int w, int r, int v, int64_t i, int s) {
  return static_cast<float>((w + 1) * 100 + (r + 1) * 10 + v) + 0.25f * static_cast<float>(i % 7) + s;
}

struct FusedCase {
  const char* name;
  int workers;
  int replicas;
  bool adjacent;
  int64_t threshold_bytes;
  WireDType wire_dtype = DT_FLOAT32;  // 16-bit: compression fp16/bf16
};
void PrintTo(const FusedCase& c, std::ostream* os) { *os << c.name; }

class FusedAllReducerTest : public ::testing::TestWithParam<FusedCase> {};

// Every worker runs two steps on its own thread: gradients become ready in
// backward order (from each replica's thread), FinishStep, and every replica
// of every worker then holds the exact sum over all devices.
TEST_P(FusedAllReducerTest, EveryReplicaHoldsTheSumOverAllDevices) {
  const FusedCase& c = GetParam();
  const std::vector<int64_t> sizes = {3, 17, 64, 5, 1000, 2};
  InMemoryKeyValueStore store;
  const std::string prefix = absl::StrCat("fused/", c.name);
  std::vector<std::thread> workers;
  for (int w = 0; w < c.workers; ++w) {
    workers.emplace_back([&, w] {
      CollectiveOptions options;
      options.rank = w;
      options.size = c.workers;
      options.host = "127.0.0.1";
      options.store = &store;
      options.prefix = prefix;
      options.timeout = absl::Seconds(60);
      options.connect_timeout = absl::Seconds(60);
      absl::StatusOr<std::unique_ptr<Collective>> collective = CreateGlooCollective(options);
      ASSERT_TRUE(collective.ok()) << collective.status();
      WorkerGradients grads = MakeGradients(sizes, c.replicas, c.adjacent);
      absl::StatusOr<std::unique_ptr<FusedAllReducer>> reducer =
          FusedAllReducer::Create(collective->get(), grads.replicas, c.threshold_bytes, c.workers, c.wire_dtype);
      ASSERT_TRUE(reducer.ok()) << reducer.status();
      // In place: every bucket when gradients are adjacent, or when each
      // bucket holds one variable; none of the multi-variable ones otherwise.
      const bool all_in_place = c.adjacent || c.threshold_bytes == 0;
      EXPECT_EQ((*reducer)->buckets_in_place() == static_cast<int>((*reducer)->plan().buckets.size()), all_in_place);
      EXPECT_FLOAT_EQ((*reducer)->gradient_scale(), 1.0f / static_cast<float>(c.workers * c.replicas));
      const int64_t total_elements = 3 + 17 + 64 + 5 + 1000 + 2;
      for (int step = 0; step < 2; ++step) {
        (*reducer)->BeginStep();
        std::vector<std::thread> replicas;
        for (int r = 0; r < c.replicas; ++r) {
          replicas.emplace_back([&, r] {
            for (int v = static_cast<int>(sizes.size()) - 1; v >= 0; --v) {
              float* g = grads.replicas[r][v].data();
              for (int64_t i = 0; i < sizes[v]; ++i) g[i] = Grad(w, r, v, i, step);
              (*reducer)->GradientReady(v);
            }
          });
        }
        for (std::thread& t : replicas) t.join();
        absl::Duration waited;
        ASSERT_TRUE((*reducer)->FinishStep(&waited).ok());
        EXPECT_EQ((*reducer)->bytes_allreduced(),
                  (step + 1) * total_elements * static_cast<int64_t>(c.wire_dtype == DT_FLOAT32 ? 4 : 2));
        for (int r = 0; r < c.replicas; ++r) {
          for (size_t v = 0; v < sizes.size(); ++v) {
            for (int64_t i = 0; i < sizes[v]; ++i) {
              float expect = 0;
              for (int ow = 0; ow < c.workers; ++ow) {
                for (int orr = 0; orr < c.replicas; ++orr) expect += Grad(ow, orr, static_cast<int>(v), i, step);
              }
              // float32 sums are exact here; a 16-bit wire rounds the worker's
              // sum and every addition across workers to the dtype's
              // significand (11 bits fp16, 8 bits bf16).
              const float tolerance = c.wire_dtype == DT_FLOAT32   ? 0.0f
                                      : c.wire_dtype == DT_FLOAT16 ? expect * c.workers * std::ldexp(1.0f, -11)
                                                                   : expect * c.workers * std::ldexp(1.0f, -8);
              ASSERT_NEAR(grads.replicas[r][v].data()[i], expect, tolerance)
                  << "worker " << w << " replica " << r << " variable " << v << " element " << i << " step " << step;
            }
          }
        }
      }
    });
  }
  for (std::thread& t : workers) t.join();
}

INSTANTIATE_TEST_SUITE_P(Layouts, FusedAllReducerTest,
                         ::testing::Values(FusedCase{"two_workers_adjacent_fused", 2, 1, true, 64 << 20},
                                           FusedCase{"two_workers_separate_buffers_packed", 2, 1, false, 64 << 20},
                                           FusedCase{"three_workers_two_replicas_small_buckets", 3, 2, true, 256},
                                           FusedCase{"two_workers_three_replicas_per_variable_packed", 2, 3, false, 0},
                                           FusedCase{"fp16_two_workers_two_replicas", 2, 2, true, 256, DT_FLOAT16},
                                           FusedCase{"bf16_three_workers_packed", 3, 1, false, 64 << 20, DT_BFLOAT16}),
                         [](const auto& info) { return std::string(info.param.name); });

// A bucket larger than one collective call takes (a variable above the
// fusion threshold) is all-reduced in pieces, every element exactly once.
TEST(FusedAllReducerChunkTest, ABucketAboveTheLargestCallIsReducedInPieces) {
  const int64_t n = FusedAllReducer::kMaxCollectiveElements * 2 + 3;
  InMemoryKeyValueStore store;
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      CollectiveOptions options;
      options.rank = w;
      options.size = 2;
      options.host = "127.0.0.1";
      options.store = &store;
      options.prefix = "fused/chunks";
      options.timeout = absl::Seconds(60);
      options.connect_timeout = absl::Seconds(60);
      std::unique_ptr<Collective> collective = CreateGlooCollective(options).value();
      WorkerGradients grads = MakeGradients({n}, 1, true);
      float* g = grads.replicas[0][0].data();
      for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>((i % 1000) + w);
      std::unique_ptr<FusedAllReducer> reducer =
          FusedAllReducer::Create(collective.get(), grads.replicas, 1 << 20, 2).value();
      reducer->BeginStep();
      reducer->GradientReady(0);
      ASSERT_TRUE(reducer->FinishStep(nullptr).ok());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], static_cast<float>(2 * (i % 1000) + 1)) << i;
      EXPECT_EQ(reducer->bytes_allreduced(), n * 4);
    });
  }
  for (std::thread& t : workers) t.join();
}

TEST(FusedAllReducerCreateTest, RefusesWhatItCannotReduce) {
  InMemoryKeyValueStore store;
  CollectiveOptions options;
  options.host = "127.0.0.1";
  options.store = &store;
  options.prefix = "fused/create";
  options.timeout = absl::Seconds(10);
  std::unique_ptr<Collective> one = CreateGlooCollective(options).value();
  EXPECT_THAT(std::string(FusedAllReducer::Create(nullptr, {{Tensor(Shape{2})}}, 0, 1).status().message()),
              HasSubstr("no collective"));
  EXPECT_THAT(std::string(FusedAllReducer::Create(one.get(), {}, 0, 1).status().message()), HasSubstr("no replicas"));
  EXPECT_THAT(std::string(FusedAllReducer::Create(one.get(), {{Tensor(Shape{2})}, {}}, 0, 1).status().message()),
              HasSubstr("disagree"));
}

// A peer that never shows up: FinishStep returns the collective's timeout
// error (naming what was waited for) instead of hanging.
TEST(FusedAllReducerFailureTest, APeerThatNeverReducesFailsTheStepWithinTheTimeout) {
  InMemoryKeyValueStore store;
  std::unique_ptr<Collective> rank0;
  std::thread joiner([&] {
    CollectiveOptions options;
    options.rank = 1;
    options.size = 2;
    options.host = "127.0.0.1";
    options.store = &store;
    options.prefix = "fused/absent";
    options.timeout = absl::Seconds(2);
    options.connect_timeout = absl::Seconds(30);
    // Joins the communicator, then never takes part in a reduction.
    absl::StatusOr<std::unique_ptr<Collective>> c = CreateGlooCollective(options);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::SleepFor(absl::Seconds(6));
  });
  CollectiveOptions options;
  options.rank = 0;
  options.size = 2;
  options.host = "127.0.0.1";
  options.store = &store;
  options.prefix = "fused/absent";
  options.timeout = absl::Seconds(2);
  options.connect_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<Collective>> collective = CreateGlooCollective(options);
  ASSERT_TRUE(collective.ok()) << collective.status();
  WorkerGradients grads = MakeGradients({8, 8}, 1, true);
  std::unique_ptr<FusedAllReducer> reducer =
      FusedAllReducer::Create(collective->get(), grads.replicas, 1 << 20, 2).value();
  reducer->BeginStep();
  const absl::Time start = absl::Now();
  absl::Status s = reducer->FinishStep(nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
  reducer.reset();
  collective->reset();
  joiner.join();
}

}  // namespace
}  // namespace pstrain
