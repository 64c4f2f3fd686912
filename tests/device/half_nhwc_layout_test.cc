// The 16-bit channels-last activation layout (device/cuda/half_nhwc_layout.h)
// and its index arithmetic (nhwc_index.h), which the conversion kernels use:
// host code, no GPU needed.
#include "device/cuda/half_nhwc_layout.h"

#include <cstdint>
#include <set>
#include <vector>

#include "device/cuda/nhwc_index.h"
#include "gtest/gtest.h"

namespace pstrain::cuda {
namespace {

// Every element's channels-last index, by the definition written out as
// loops: NHWC order walks n, then the spatial position, then the channel.
std::vector<int64_t> NhwcIndicesByLoops(const NchwExtents& e) {
  std::vector<int64_t> nhwc(e.count());
  int64_t next = 0;
  for (int64_t n = 0; n < e.n; ++n) {
    for (int64_t s = 0; s < e.hw; ++s) {
      for (int64_t c = 0; c < e.c; ++c) nhwc[(n * e.c + c) * e.hw + s] = next++;
    }
  }
  return nhwc;
}

TEST(NhwcIndexTest, MatchesTheDefinitionAndInvertsForManyExtents) {
  const std::vector<NchwExtents> extents = {{2, 3, 20}, {1, 1, 1}, {4, 1, 9}, {3, 7, 1}, {2, 64, 49}, {5, 3, 6}};
  for (const NchwExtents& e : extents) {
    const std::vector<int64_t> want = NhwcIndicesByLoops(e);
    std::set<int64_t> seen;
    for (int64_t i = 0; i < e.count(); ++i) {
      const int64_t j = NhwcIndexOf(i, e);
      ASSERT_EQ(j, want[i]) << "n " << e.n << " c " << e.c << " hw " << e.hw << " plain index " << i;
      ASSERT_EQ(PlainIndexOf(j, e), i) << "n " << e.n << " c " << e.c << " hw " << e.hw;
      seen.insert(j);
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), e.count()) << "a permutation of the indices";
  }
}

TEST(NhwcIndexTest, OneChannelOrOnePositionIsTheSameArrangement) {
  const NchwExtents one_channel{3, 1, 10}, one_position{3, 10, 1};
  for (int64_t i = 0; i < 30; ++i) {
    EXPECT_EQ(NhwcIndexOf(i, one_channel), i);
    EXPECT_EQ(NhwcIndexOf(i, one_position), i);
  }
}

TEST(HalfNhwcLayoutTest, HoldsTwoBytesPerElement) {
  EXPECT_EQ(HalfNhwcLayout({64, 256, 56, 56}, HalfType::kBf16).num_bytes(), size_t{64} * 256 * 56 * 56 * 2);
  EXPECT_EQ(HalfNhwcLayout({8, 5}, HalfType::kFp16).num_bytes(), size_t{80});
  EXPECT_EQ(HalfNhwcLayout({0, 3, 2, 2}, HalfType::kFp16).num_bytes(), size_t{0});
}

TEST(HalfNhwcLayoutTest, EqualOnlyInTypeAndShape) {
  const TensorLayoutPtr a = MakeHalfNhwcLayout({2, 3, 4, 5}, HalfType::kBf16);
  EXPECT_TRUE(SameLayout(a, MakeHalfNhwcLayout({2, 3, 4, 5}, HalfType::kBf16)));
  EXPECT_FALSE(SameLayout(a, MakeHalfNhwcLayout({2, 3, 4, 5}, HalfType::kFp16)));
  EXPECT_FALSE(SameLayout(a, MakeHalfNhwcLayout({2, 3, 5, 4}, HalfType::kBf16)));
  EXPECT_FALSE(SameLayout(a, nullptr));
  EXPECT_EQ(a->ToString(), "nhwc bf16 [2,3,4,5]");
  EXPECT_EQ(AsHalfNhwc(a)->type(), HalfType::kBf16);
  EXPECT_EQ(AsHalfNhwc(nullptr), nullptr);
}

TEST(HalfNhwcLayoutTest, ExtentsOfEachRank) {
  const NchwExtents two = ExtentsOf({8, 5}), three = ExtentsOf({2, 3, 7}), four = ExtentsOf({2, 3, 4, 5});
  EXPECT_EQ(two.n, 8);
  EXPECT_EQ(two.c, 5);
  EXPECT_EQ(two.hw, 1);
  EXPECT_EQ(three.hw, 7);
  EXPECT_EQ(four.n, 2);
  EXPECT_EQ(four.c, 3);
  EXPECT_EQ(four.hw, 20);
  EXPECT_DEATH(ExtentsOf({5}), "channels-last tensor is");
}

}  // namespace
}  // namespace pstrain::cuda
