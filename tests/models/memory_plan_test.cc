// PlanMemory: buffers alive at the same time never share bytes, buffers that
// are not alive together do, offsets are aligned, and the arena never falls
// below the peak of live bytes (and stays near it on the shape of a model's
// step: a chain whose activations die one after another in backward).
#include "models/memory_plan.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

bool LifetimesOverlap(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_use <= b.last_use && b.first_use <= a.last_use;
}

// Every pair alive together occupies disjoint bytes.
void ExpectNoConflicts(const std::vector<BufferLifetime>& buffers, const MemoryPlan& plan, size_t alignment) {
  ASSERT_EQ(plan.offsets.size(), buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % alignment, 0u) << "buffer " << i;
    EXPECT_LE(plan.offsets[i] + buffers[i].bytes, plan.arena_bytes) << "buffer " << i;
    for (size_t j = i + 1; j < buffers.size(); ++j) {
      if (!LifetimesOverlap(buffers[i], buffers[j]) || buffers[i].bytes == 0 || buffers[j].bytes == 0) continue;
      const bool disjoint = plan.offsets[i] + buffers[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + buffers[j].bytes <= plan.offsets[i];
      EXPECT_TRUE(disjoint) << "buffers " << i << " [" << plan.offsets[i] << ", +" << buffers[i].bytes << ") and " << j
                            << " [" << plan.offsets[j] << ", +" << buffers[j].bytes << ") are alive together";
    }
  }
}

TEST(MemoryPlanTest, BuffersNotAliveTogetherShareBytes) {
  // a: steps 0-1, b: 2-3 (after a), c: 1-2 (overlaps both).
  const std::vector<BufferLifetime> buffers = {{1000, 0, 1}, {1000, 2, 3}, {500, 1, 2}};
  const MemoryPlan plan = PlanMemory(buffers, 64);
  ExpectNoConflicts(buffers, plan, 64);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);  // a's bytes serve b
  EXPECT_EQ(plan.total_bytes, 1024u + 1024u + 512u);
  EXPECT_EQ(plan.arena_bytes, 1024u + 512u);
  EXPECT_EQ(LiveBytesPeak(buffers, 64), 1024u + 512u);
}

TEST(MemoryPlanTest, AReadAndAWriteAtTheSameStepDoNotShare) {
  // Inclusive lifetimes: the layer at step 1 reads a while it writes b.
  const std::vector<BufferLifetime> buffers = {{256, 0, 1}, {256, 1, 2}};
  const MemoryPlan plan = PlanMemory(buffers, 64);
  ExpectNoConflicts(buffers, plan, 64);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arena_bytes, 512u);
}

TEST(MemoryPlanTest, AForwardAndBackwardChainStaysNearItsLivePeak) {
  // A step of n layers: activation k from Forward(k) to Backward(k), the
  // gradient of k from Backward(k + 1) to Backward(k); sizes shrink with depth.
  const int n = 12;
  std::vector<BufferLifetime> buffers;
  for (int k = 1; k < n; ++k) buffers.push_back({static_cast<size_t>(4096 * (n - k)), k, 2 * n - k});
  for (int k = 1; k < n; ++k) buffers.push_back({static_cast<size_t>(4096 * (n - k)), 2 * n - k - 1, 2 * n - k});
  const MemoryPlan plan = PlanMemory(buffers, 256);
  ExpectNoConflicts(buffers, plan, 256);
  const size_t peak = LiveBytesPeak(buffers, 256);
  EXPECT_GE(plan.arena_bytes, peak);
  EXPECT_LE(plan.arena_bytes, peak * 11 / 10);  // greedy by size: 8.6% above here
  EXPECT_LT(plan.arena_bytes, plan.total_bytes * 2 / 3);
}

TEST(MemoryPlanTest, RandomLifetimesNeverConflict) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<BufferLifetime> buffers(1 + rng() % 60);
    for (BufferLifetime& b : buffers) {
      b.bytes = rng() % 5000;
      b.first_use = static_cast<int>(rng() % 40);
      b.last_use = b.first_use + static_cast<int>(rng() % 10);
    }
    const MemoryPlan plan = PlanMemory(buffers, 128);
    ExpectNoConflicts(buffers, plan, 128);
    EXPECT_GE(plan.arena_bytes, LiveBytesPeak(buffers, 128));
    EXPECT_LE(plan.arena_bytes, plan.total_bytes);
  }
}

TEST(MemoryPlanTest, NothingToPlace) {
  const MemoryPlan plan = PlanMemory({}, 64);
  EXPECT_EQ(plan.arena_bytes, 0u);
  EXPECT_TRUE(plan.offsets.empty());
}

}  // namespace
}  // namespace pstrain
