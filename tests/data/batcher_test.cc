#include "common/data/batcher.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "common/data/synthetic.h"
#include "glog/logging.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// 100 examples: global batch 16 gives 6 steps per epoch with 4 examples left over.
Dataset SmallData() { return MakeSyntheticDataset(100, {1, 2, 3}, 10, /*seed=*/7); }

ShardedBatcher MakeBatcher(const Dataset* data, int w, int num_workers, int b, uint64_t seed = 42,
                           bool shuffle = true) {
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(data, w, num_workers, b, seed, shuffle);
  CHECK(batcher.ok()) << batcher.status();
  return std::move(batcher).value();
}

TEST(ShardedBatcherTest, StepsPerEpochIsFloorOfExamplesOverGlobalBatch) {
  Dataset data = SmallData();
  EXPECT_EQ(MakeBatcher(&data, 0, 2, 8).steps_per_epoch(), 6);
  EXPECT_EQ(MakeBatcher(&data, 0, 2, 8).global_batch(), 16);
  EXPECT_EQ(MakeBatcher(&data, 0, 1, 100).steps_per_epoch(), 1);
  EXPECT_EQ(MakeBatcher(&data, 0, 3, 11).steps_per_epoch(), 3);
}

TEST(ShardedBatcherTest, CreateRejectsBadArguments) {
  Dataset data = SmallData();
  auto code = [&](const Dataset* d, int w, int nw, int b) {
    return ShardedBatcher::Create(d, w, nw, b, 1, true).status().code();
  };
  EXPECT_EQ(code(nullptr, 0, 1, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&data, 0, 0, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&data, 2, 2, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&data, -1, 2, 1), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(&data, 0, 1, 0), absl::StatusCode::kInvalidArgument);
  absl::Status too_big = ShardedBatcher::Create(&data, 0, 2, 51, 1, true).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_big.message(), HasSubstr("fewer than one global batch of 102"));
  Dataset broken = SmallData();
  broken.labels.pop_back();
  EXPECT_EQ(code(&broken, 0, 1, 1), absl::StatusCode::kInvalidArgument);
}

TEST(ShardedBatcherTest, OneWorkerWithBatchWbSeesTheUnionOfWWorkers) {
  Dataset data = SmallData();
  ShardedBatcher single = MakeBatcher(&data, 0, 1, 16);
  ShardedBatcher w0 = MakeBatcher(&data, 0, 2, 8);
  ShardedBatcher w1 = MakeBatcher(&data, 1, 2, 8);
  ASSERT_EQ(single.steps_per_epoch(), w0.steps_per_epoch());
  Tensor big, a, b;
  std::vector<int32_t> big_labels, a_labels, b_labels;
  // Three epochs and a bit, so epoch boundaries are crossed.
  for (int64_t step = 0; step < 20; ++step) {
    std::vector<int64_t> want = single.ExampleIndices(step);
    std::vector<int64_t> got = w0.ExampleIndices(step);
    std::vector<int64_t> got1 = w1.ExampleIndices(step);
    got.insert(got.end(), got1.begin(), got1.end());
    ASSERT_EQ(got, want) << "step " << step;

    ASSERT_TRUE(single.Fill(step, &big, &big_labels).ok());
    ASSERT_TRUE(w0.Fill(step, &a, &a_labels).ok());
    ASSERT_TRUE(w1.Fill(step, &b, &b_labels).ok());
    ASSERT_EQ(big.shape(), (Shape{16, 1, 2, 3}));
    ASSERT_EQ(a.shape(), (Shape{8, 1, 2, 3}));
    std::vector<float> joined(a.data(), a.data() + a.num_elements());
    joined.insert(joined.end(), b.data(), b.data() + b.num_elements());
    EXPECT_EQ(std::vector<float>(big.data(), big.data() + big.num_elements()), joined) << "step " << step;
    a_labels.insert(a_labels.end(), b_labels.begin(), b_labels.end());
    EXPECT_EQ(big_labels, a_labels) << "step " << step;
  }
}

TEST(ShardedBatcherTest, FillCopiesTheIndexedExamples) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 1, 3, 5);
  Tensor images;
  std::vector<int32_t> labels;
  for (int64_t step : {0, 4, 9}) {
    ASSERT_TRUE(batcher.Fill(step, &images, &labels).ok());
    std::vector<int64_t> idx = batcher.ExampleIndices(step);
    ASSERT_EQ(labels.size(), 5u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(labels[i], data.labels[idx[i]]);
      EXPECT_EQ(0, std::memcmp(images.data() + i * 6, data.images.data() + idx[i] * 6, 6 * sizeof(float)));
    }
  }
}

TEST(ShardedBatcherTest, FillReusesATensorOfTheRightShape) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 0, 1, 4);
  Tensor images({4, 1, 2, 3});
  const float* before = images.data();
  std::vector<int32_t> labels;
  ASSERT_TRUE(batcher.Fill(0, &images, &labels).ok());
  EXPECT_EQ(images.data(), before);
  Tensor wrong({3, 6});
  ASSERT_TRUE(batcher.Fill(0, &wrong, &labels).ok());
  EXPECT_EQ(wrong.shape(), (Shape{4, 1, 2, 3}));
}

TEST(ShardedBatcherTest, EachEpochUsesDistinctExamples) {
  Dataset data = SmallData();
  const int kWorkers = 3, kBatch = 7;  // G = 21, 4 steps per epoch, 16 examples unused each epoch.
  std::vector<ShardedBatcher> workers;
  for (int w = 0; w < kWorkers; ++w) workers.push_back(MakeBatcher(&data, w, kWorkers, kBatch));
  const int64_t spe = workers[0].steps_per_epoch();
  ASSERT_EQ(spe, 4);
  std::vector<std::set<int64_t>> per_epoch;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    for (int64_t step = epoch * spe; step < (epoch + 1) * spe; ++step) {
      for (ShardedBatcher& b : workers) {
        for (int64_t i : b.ExampleIndices(step)) {
          EXPECT_GE(i, 0);
          EXPECT_LT(i, 100);
          EXPECT_TRUE(seen.insert(i).second) << "example " << i << " used twice in epoch " << epoch;
        }
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(spe * kWorkers * kBatch));
    per_epoch.push_back(seen);
  }
  // With 16 of 100 examples dropped per epoch, a fresh shuffle drops different ones.
  EXPECT_NE(per_epoch[0], per_epoch[1]);
}

TEST(ShardedBatcherTest, DifferentEpochsHaveDifferentOrder) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 0, 1, 100);  // One step is one whole epoch.
  std::vector<int64_t> e0 = batcher.ExampleIndices(0);
  std::vector<int64_t> e1 = batcher.ExampleIndices(1);
  std::vector<int64_t> e2 = batcher.ExampleIndices(2);
  EXPECT_NE(e0, e1);
  EXPECT_NE(e1, e2);
  std::vector<int64_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(e0, identity);
  // Still permutations of everything.
  std::sort(e1.begin(), e1.end());
  EXPECT_EQ(e1, identity);
  // Going back to an earlier epoch recomputes the same order.
  EXPECT_EQ(batcher.ExampleIndices(0), e0);
}

TEST(ShardedBatcherTest, DeterministicAcrossInstancesAndSeedDependent) {
  Dataset data = SmallData();
  ShardedBatcher a = MakeBatcher(&data, 1, 2, 8, /*seed=*/5);
  ShardedBatcher b = MakeBatcher(&data, 1, 2, 8, /*seed=*/5);
  ShardedBatcher c = MakeBatcher(&data, 1, 2, 8, /*seed=*/6);
  bool any_differs = false;
  for (int64_t step = 0; step < 15; ++step) {
    EXPECT_EQ(a.ExampleIndices(step), b.ExampleIndices(step)) << "step " << step;
    any_differs |= a.ExampleIndices(step) != c.ExampleIndices(step);
  }
  EXPECT_TRUE(any_differs);
  // Query order does not matter: b read backwards gives what a read forwards gave.
  std::vector<std::vector<int64_t>> forward, backward;
  for (int64_t step = 0; step < 15; ++step) forward.push_back(a.ExampleIndices(step));
  for (int64_t step = 14; step >= 0; --step) backward.insert(backward.begin(), b.ExampleIndices(step));
  EXPECT_EQ(forward, backward);
}

TEST(ShardedBatcherTest, PermutationIsPinned) {
  // The shuffle must be identical on every machine and standard library; this
  // pins its output so an accidental change (e.g. to std::shuffle) is caught.
  // The values were computed independently by a Python transcription of
  // mt19937_64 + DeriveSeed + rejection-sampled Fisher-Yates.
  Dataset data = MakeSyntheticDataset(10, {1, 1, 1}, 2, 0);
  ShardedBatcher batcher = MakeBatcher(&data, 0, 1, 10, /*seed=*/1234);
  EXPECT_EQ(batcher.ExampleIndices(0), (std::vector<int64_t>{4, 2, 3, 1, 9, 5, 6, 8, 0, 7}));
  EXPECT_EQ(batcher.ExampleIndices(1), (std::vector<int64_t>{0, 5, 6, 3, 4, 7, 8, 2, 1, 9}));
}

TEST(ShardedBatcherTest, NoShuffleIsSequential) {
  Dataset data = SmallData();
  ShardedBatcher w1 = MakeBatcher(&data, 1, 2, 8, 42, /*shuffle=*/false);
  EXPECT_EQ(w1.ExampleIndices(0), (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(w1.ExampleIndices(2), (std::vector<int64_t>{40, 41, 42, 43, 44, 45, 46, 47}));
  // Step 6 starts epoch 1 from the beginning again.
  EXPECT_EQ(w1.ExampleIndices(6), w1.ExampleIndices(0));
}

TEST(ShardedBatcherTest, FillRangeIsSequentialAndIgnoresSharding) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 1, 2, 8);
  Tensor images;
  std::vector<int32_t> labels;
  ASSERT_TRUE(batcher.FillRange(96, 4, &images, &labels).ok());  // A short last evaluation batch.
  ASSERT_EQ(images.shape(), (Shape{4, 1, 2, 3}));
  EXPECT_EQ(labels, (std::vector<int32_t>(data.labels.begin() + 96, data.labels.end())));
  EXPECT_EQ(std::vector<float>(images.data(), images.data() + 24),
            std::vector<float>(data.images.begin() + 96 * 6, data.images.end()));
}

TEST(ShardedBatcherDeathTest, FillRangePastTheEndDies) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 0, 1, 8);
  Tensor images;
  std::vector<int32_t> labels;
  EXPECT_DEATH((void)batcher.FillRange(98, 4, &images, &labels), "past the end");
}

TEST(ShardedBatcherTest, ConcurrentFillsAgree) {
  Dataset data = SmallData();
  ShardedBatcher batcher = MakeBatcher(&data, 0, 2, 8);
  std::vector<std::vector<int64_t>> want;
  for (int64_t step = 0; step < 60; ++step) want.push_back(batcher.ExampleIndices(step));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Tensor images;
      std::vector<int32_t> labels;
      for (int64_t step = 0; step < 60; ++step) {
        const int64_t s = (step * (t + 1)) % 60;  // Different threads hop across epochs differently.
        ASSERT_TRUE(batcher.Fill(s, &images, &labels).ok());
        if (batcher.ExampleIndices(s) != want[s]) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace pstrain
