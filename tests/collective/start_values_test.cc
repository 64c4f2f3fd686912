// Start values of an all-reduce: ranks that built the same values skip the
// broadcast, a rank whose values differ gets the chief's. Real Gloo rings,
// ranks as threads of this process over loopback.
#include "worker/collective/start_values.h"

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/collective/loopback_rank.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"

namespace pstrain {
namespace {

// The real collective, counting the elements this rank broadcast or received.
class CountingCollective : public Collective {
 public:
  explicit CountingCollective(std::unique_ptr<Collective> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  absl::Status AllReduceSumTyped(void* data, size_t count, WireDType dtype) override {
    return inner_->AllReduceSumTyped(data, count, dtype);
  }
  absl::Status BroadcastTyped(void* data, size_t count, WireDType dtype, int root) override {
    broadcast_elements += count;
    return inner_->BroadcastTyped(data, count, dtype, root);
  }
  absl::Status Barrier() override { return inner_->Barrier(); }
  size_t broadcast_elements = 0;

 private:
  std::unique_ptr<Collective> inner_;
};

// Runs `fn(rank, collective)` on `size` threads joined to one Gloo ring.
void RunRanks(int size, const std::string& prefix, const std::function<void(int, CountingCollective&)>& fn) {
  InMemoryKeyValueStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Collective>> gloo =
          CreateGlooCollective(test::LoopbackRank(r, size, &store, prefix));
      ASSERT_TRUE(gloo.ok()) << "rank " << r << ": " << gloo.status();
      CountingCollective counting(*std::move(gloo));
      fn(r, counting);
    });
  }
  for (std::thread& t : threads) t.join();
}

// Two variables of `rank`'s model: the same on every rank unless `differ`.
std::vector<std::vector<float>> Model(int rank, bool differ) {
  std::vector<std::vector<float>> model = {std::vector<float>(1000), std::vector<float>(37)};
  for (auto& v : model) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i * 7 % 113);
  }
  if (differ) model[1][36] += 1.0f + static_cast<float>(rank);
  return model;
}

std::vector<absl::Span<float>> Spans(std::vector<std::vector<float>>& model) {
  std::vector<absl::Span<float>> spans;
  for (auto& v : model) spans.emplace_back(v.data(), v.size());
  return spans;
}

TEST(StartValuesTest, EqualValuesAreNotBroadcast) {
  std::atomic<int> broadcasts{0};
  RunRanks(3, "equal", [&](int r, CountingCollective& c) {
    std::vector<std::vector<float>> model = Model(r, /*differ=*/false);
    absl::StatusOr<bool> broadcast = AgreeOrBroadcast(c, Spans(model));
    ASSERT_TRUE(broadcast.ok()) << broadcast.status();
    if (*broadcast) ++broadcasts;
    EXPECT_EQ(c.broadcast_elements, 2u) << "rank " << r << ": only the chief's digest";
    EXPECT_EQ(model, Model(0, false));
  });
  EXPECT_EQ(broadcasts, 0);
}

TEST(StartValuesTest, OneDifferingRankGetsTheChiefsValuesEverywhere) {
  std::atomic<int> broadcasts{0};
  RunRanks(3, "differ", [&](int r, CountingCollective& c) {
    std::vector<std::vector<float>> model = Model(r, /*differ=*/r == 2);
    absl::StatusOr<bool> broadcast = AgreeOrBroadcast(c, Spans(model));
    ASSERT_TRUE(broadcast.ok()) << broadcast.status();
    if (*broadcast) ++broadcasts;
    EXPECT_EQ(c.broadcast_elements, 2u + 1000u + 37u) << "rank " << r;
    EXPECT_EQ(model, Model(0, false)) << "rank " << r;
  });
  EXPECT_EQ(broadcasts, 3) << "every rank learns that one differed";
}

TEST(StartValuesTest, DigestCoversCountsAndBytes) {
  std::vector<float> a = {1, 2, 3, 4};
  const uint32_t whole = StartValuesDigest({absl::Span<float>(a)});
  EXPECT_EQ(whole, StartValuesDigest({absl::Span<float>(a)}));
  // The same bytes split differently, and one bit changed, differ.
  EXPECT_NE(whole, StartValuesDigest({absl::Span<float>(a.data(), 2), absl::Span<float>(a.data() + 2, 2)}));
  a[3] = 4.0000005f;
  EXPECT_NE(whole, StartValuesDigest({absl::Span<float>(a)}));
}

}  // namespace
}  // namespace pstrain
