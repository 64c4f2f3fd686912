// Wire compression: 16-bit encodings (bit patterns, rounding, range) and
// top-k selection with error feedback.
#include "common/compression/compression.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "Eigen/Core"
#include "common/compression/topk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint16_t> Encode(WireDType dtype, const std::vector<float>& values) {
  std::vector<uint16_t> out(values.size());
  EncodeFloats(dtype, values.data(), values.size(), out.data());
  return out;
}

std::vector<float> Decode(WireDType dtype, const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  DecodeFloats(dtype, bits.data(), bits.size(), out.data());
  return out;
}

TEST(CompressionNamesTest, ParsedOrRefusedWithTheKnownOnes) {
  EXPECT_EQ(*ParseCompression("fp16"), Compression::kFp16);
  EXPECT_EQ(*ParseCompression("topk"), Compression::kTopK);
  absl::Status bad = ParseCompression("int8").status();
  EXPECT_THAT(std::string(bad.message()), HasSubstr("unknown compression 'int8'; known: bf16, fp16, none, topk"));
  EXPECT_EQ(DenseWireDType(Compression::kBf16), DT_BFLOAT16);
  EXPECT_EQ(DenseWireDType(Compression::kTopK), DT_FLOAT32);
  EXPECT_EQ(WireDTypeSize(DT_FLOAT16), 2u);
  EXPECT_EQ(WireDTypeSize(static_cast<WireDType>(42)), 0u);
}

TEST(HalfTest, KnownBitPatterns) {
  EXPECT_THAT(Encode(DT_FLOAT16, {1.0f, -2.0f, 0.0f, 65504.0f}), ElementsAre(0x3C00, 0xC000, 0x0000, 0x7BFF));
  EXPECT_THAT(Encode(DT_BFLOAT16, {1.0f, -2.0f, 0.0f}), ElementsAre(0x3F80, 0xC000, 0x0000));
}

// Whichever path converts (F16C or software), the bits are Eigen's, for
// ordinary values, denormals, overflow, infinities, NaN and ties.
TEST(HalfTest, EveryPathGivesEigensBits) {
  std::vector<float> values;
  for (int i = -2000; i <= 2000; ++i) values.push_back(static_cast<float>(i) * 0.37f);
  for (float v : {1e-6f, -3e-7f, 6.1e-5f, 65504.0f, 65520.0f, 1e9f, -1e9f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), 1.0f + std::ldexp(1.0f, -11), 0.0f, -0.0f}) {
    values.push_back(v);
  }
  const std::vector<uint16_t> bits = Encode(DT_FLOAT16, values);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t want = Eigen::numext::bit_cast<uint16_t>(Eigen::half(values[i]));
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(Decode(DT_FLOAT16, {bits[i]})[0]));
      continue;
    }
    ASSERT_EQ(bits[i], want) << values[i] << " (hardware conversion: " << HardwareHalfConversion() << ")";
    ASSERT_EQ(Decode(DT_FLOAT16, {bits[i]})[0], static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(want)));
  }
  // Sums of 16-bit values, 8 at a time and the tail.
  std::vector<uint16_t> a = Encode(DT_FLOAT16, std::vector<float>(values.begin(), values.begin() + 19));
  std::vector<uint16_t> b = Encode(DT_FLOAT16, std::vector<float>(values.begin() + 100, values.begin() + 119));
  std::vector<uint16_t> sum(19);
  AddEncoded(DT_FLOAT16, a.data(), b.data(), 19, sum.data());
  for (size_t i = 0; i < 19; ++i) {
    const float s = static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(a[i])) +
                    static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(b[i]));
    EXPECT_EQ(sum[i], Eigen::numext::bit_cast<uint16_t>(Eigen::half(s))) << i;
  }
}

TEST(HalfTest, Bf16GivesEigensBits) {
  std::vector<float> values;
  for (int i = -3000; i <= 3000; ++i) values.push_back(static_cast<float>(i) * 1.37e-3f);
  for (float v : {1e-40f, -1e-39f, 3.0e38f, -3.4e38f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN(), 1.0f + std::ldexp(1.0f, -8), 0.0f, -0.0f}) {
    values.push_back(v);
  }
  const std::vector<uint16_t> bits = Encode(DT_BFLOAT16, values);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(bits[i], Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(values[i]))) << values[i];
  }
  std::vector<uint16_t> sum(values.size());
  AddEncoded(DT_BFLOAT16, bits.data(), bits.data(), bits.size(), sum.data());
  for (size_t i = 0; i < values.size(); ++i) {
    const float b = static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits[i]));
    EXPECT_EQ(sum[i], Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(b + b))) << values[i];
  }
}

TEST(HalfTest, RoundTripIsExactForRepresentableValues) {
  const std::vector<float> values = {0.5f, -0.375f, 1024.0f, 3.0f, -0.0009765625f};
  EXPECT_EQ(Decode(DT_FLOAT16, Encode(DT_FLOAT16, values)), values);
  EXPECT_EQ(Decode(DT_BFLOAT16, Encode(DT_BFLOAT16, values)), values);
}

TEST(HalfTest, RoundsToNearestEvenAndKeepsTheRelativeError) {
  // 1 + 2^-11 lies halfway between fp16's 1 and 1 + 2^-10: ties go to even (1).
  EXPECT_EQ(Decode(DT_FLOAT16, Encode(DT_FLOAT16, {1.0f + std::ldexp(1.0f, -11)}))[0], 1.0f);
  // bf16 keeps 8 significant bits: relative error at most 2^-9.
  for (float v : {3.14159f, -0.001234f, 12345.678f}) {
    const float back = Decode(DT_BFLOAT16, Encode(DT_BFLOAT16, {v}))[0];
    EXPECT_LE(std::fabs(back - v), std::fabs(v) * std::ldexp(1.0f, -9)) << v;
  }
}

TEST(HalfTest, Fp16OverflowsToInfinityAndBf16KeepsTheRange) {
  EXPECT_TRUE(std::isinf(Decode(DT_FLOAT16, Encode(DT_FLOAT16, {1e6f}))[0]));
  EXPECT_NEAR(Decode(DT_BFLOAT16, Encode(DT_BFLOAT16, {1e30f}))[0], 1e30f, 1e28f);
}

TEST(HalfTest, DecodeReadsUnalignedInput) {
  std::vector<uint16_t> bits = Encode(DT_FLOAT16, {1.5f, 2.5f});
  std::vector<char> shifted(1 + 4);
  std::memcpy(shifted.data() + 1, bits.data(), 4);
  float out[2];
  DecodeFloats(DT_FLOAT16, shifted.data() + 1, 2, out);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], 2.5f);
}

TEST(HalfTest, AddEncodedSumsInFloatAndRounds) {
  for (WireDType dtype : {DT_FLOAT16, DT_BFLOAT16}) {
    std::vector<uint16_t> a = Encode(dtype, {1.0f, 2.0f, -3.0f}), b = Encode(dtype, {0.5f, 2.0f, 3.0f});
    AddEncoded(dtype, a.data(), b.data(), 3, a.data());  // in place
    EXPECT_THAT(Decode(dtype, a), ElementsAre(1.5f, 4.0f, 0.0f));
  }
  std::vector<float> dst = {1.0f, 1.0f};
  AddDecodedFloats(DT_BFLOAT16, Encode(DT_BFLOAT16, {2.0f, -4.0f}).data(), 2, dst.data());
  EXPECT_THAT(dst, ElementsAre(3.0f, -3.0f));
}

TEST(TopKTest, KIsTheRatioRoundedUpWithinOneAndN) {
  EXPECT_EQ(TopKEncoder(1000, 0.01).k(), 10);
  EXPECT_EQ(TopKEncoder(1001, 0.01).k(), 11);
  EXPECT_EQ(TopKEncoder(5, 0.01).k(), 1);
  EXPECT_EQ(TopKEncoder(5, 1.0).k(), 5);
  EXPECT_EQ(TopKEncoder(1000, 0.01).wire_bytes(), 80);
}

TEST(TopKTest, SendsTheLargestMagnitudesInIndexOrderAndKeepsTheRest) {
  TopKEncoder topk(6, 0.5);  // k = 3
  const std::vector<float> g = {0.1f, -5.0f, 2.0f, 0.0f, 3.0f, -0.5f};
  std::vector<uint32_t> idx(3);
  std::vector<float> val(3);
  topk.Encode(g.data(), idx.data(), val.data());
  EXPECT_THAT(idx, ElementsAre(1, 2, 4));
  EXPECT_THAT(val, ElementsAre(-5.0f, 2.0f, 3.0f));
  EXPECT_THAT(topk.residual(), ElementsAre(0.1f, 0.0f, 0.0f, 0.0f, 0.0f, -0.5f));
}

TEST(TopKTest, ErrorFeedbackSendsEveryBitEventually) {
  // Integer-valued floats keep every sum exact.
  const int n = 50, steps = 40;
  TopKEncoder topk(n, 0.1);  // k = 5
  std::vector<float> sent(n, 0.0f), total(n, 0.0f);
  std::vector<uint32_t> idx(topk.k());
  std::vector<float> val(topk.k());
  for (int s = 0; s < steps; ++s) {
    std::vector<float> g(n);
    for (int i = 0; i < n; ++i) g[i] = static_cast<float>((i * 7 + s * 3) % 11) - 5.0f;
    for (int i = 0; i < n; ++i) total[i] += g[i];
    topk.Encode(g.data(), idx.data(), val.data());
    EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
    for (int j = 0; j < topk.k(); ++j) sent[idx[j]] += val[j];
  }
  // What was sent plus what is still held back is exactly what was given.
  for (int i = 0; i < n; ++i) EXPECT_EQ(sent[i] + topk.residual()[i], total[i]) << i;
  // And the residual stays bounded (no element is starved forever).
  for (int i = 0; i < n; ++i) EXPECT_LT(std::fabs(topk.residual()[i]), 100.0f) << i;
}

TEST(TopKTest, TiesGoToTheLowerIndex) {
  TopKEncoder topk(4, 0.5);
  const std::vector<float> g = {1.0f, -1.0f, 1.0f, 1.0f};
  std::vector<uint32_t> idx(2);
  std::vector<float> val(2);
  topk.Encode(g.data(), idx.data(), val.data());
  EXPECT_THAT(idx, ElementsAre(0, 1));
}

}  // namespace
}  // namespace pstrain
