// Bags of embedding rows (worker/bag_pooling.h): sums and means of known
// rows, padding and missing features, ids twice in a bag; the gradient is
// the pooling's exact transpose, so a row's gradient dropped, doubled or
// left undivided by the bag's length breaks <Pool(x), g> = <x, Grad(g)>.
#include "worker/bag_pooling.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

// Rows k = 0..3 of dim 2: (k + 1, 10 * (k + 1)).
const std::vector<float> kRows = {1, 10, 2, 20, 3, 30, 4, 40};

std::vector<float> Pool(const std::vector<int32_t>& slots, bool mean) {
  std::vector<float> out(2, -7.0f);  // overwritten, not added to
  PoolBag(slots.data(), static_cast<int>(slots.size()), mean, kRows.data(), 2, out.data());
  return out;
}

TEST(BagPoolingTest, SumsAndMeansTheBagsRows) {
  EXPECT_EQ(Pool({0, 2, -1}, /*mean=*/false), (std::vector<float>{4, 40}));
  EXPECT_EQ(Pool({0, 2, -1}, /*mean=*/true), (std::vector<float>{2, 20}));
  EXPECT_EQ(Pool({3}, true), (std::vector<float>{4, 40}));
  EXPECT_EQ(Pool({-1, -1}, false), (std::vector<float>{0, 0}));  // a missing feature
  EXPECT_EQ(Pool({-1, -1}, true), (std::vector<float>{0, 0}));
  EXPECT_EQ(Pool({1, 1, 3}, false), (std::vector<float>{8, 80}));  // row 1 twice
  EXPECT_EQ(Pool({1, 1, 3}, true), (std::vector<float>{8.0f / 3, 80.0f / 3}));
  EXPECT_EQ(BagLength(std::vector<int32_t>{1, -1, 1, 0}.data(), 4), 3);
}

TEST(BagPoolingTest, TheGradientReachesEachIdOfTheBag) {
  std::vector<float> grads(8, 0.0f);
  const std::vector<int32_t> slots = {1, 1, 3, -1};
  const float g[2] = {1, 2};
  AddBagGradient(slots.data(), 4, /*mean=*/false, g, 0.5f, 2, grads.data());
  EXPECT_EQ(grads, (std::vector<float>{0, 0, 1, 2, 0, 0, 0.5f, 1}));
  AddBagGradient(slots.data(), 4, /*mean=*/true, g, 3.0f, 2, grads.data());  // adds onto what is there
  EXPECT_EQ(grads, (std::vector<float>{0, 0, 3, 6, 0, 0, 1.5f, 3}));
}

// <PoolBag(x), g> equals <x, AddBagGradient(g)> for random rows, bags and g.
TEST(BagPoolingTest, TheGradientIsThePoolingsTranspose) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1, 1);
  std::uniform_int_distribution<int32_t> slot(-1, 5);
  constexpr int kDim = 3, kRowsCount = 6, kBag = 5;
  for (bool mean : {false, true}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> rows(kRowsCount * kDim), g(kDim), pooled(kDim), row_grads(kRowsCount * kDim, 0.0f);
      std::vector<int32_t> slots(kBag);
      for (float& v : rows) v = value(rng);
      for (float& v : g) v = value(rng);
      for (int32_t& k : slots) k = slot(rng);
      PoolBag(slots.data(), kBag, mean, rows.data(), kDim, pooled.data());
      AddBagGradient(slots.data(), kBag, mean, g.data(), 1.0f, kDim, row_grads.data());
      double forward = 0, backward = 0;
      for (int d = 0; d < kDim; ++d) forward += double{pooled[d]} * g[d];
      for (size_t i = 0; i < rows.size(); ++i) backward += double{rows[i]} * row_grads[i];
      ASSERT_NEAR(forward, backward, 1e-5) << "mean " << mean << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace pstrain
