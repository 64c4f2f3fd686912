// The synthetic CTR generator (common/data/criteo/synthetic_ctr.h): example i
// from (options, i) alone; Zipf's law checked by chi-square against the
// probabilities computed here (at p = 1e-6, and shown to reject an exponent
// 0.1 off); the planted model's positive rate, its probabilities
// recomputed from the record, and its AUC.
#include "common/data/criteo/synthetic_ctr.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/data/criteo/auc.h"
#include "common/data/criteo/criteo_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::criteo {
namespace {

using ::testing::HasSubstr;

// C1 has 20 ids (the sampler's table), C2 ten million (rejection-inversion).
SyntheticCtrOptions TestOptions(uint64_t seed) {
  SyntheticCtrOptions o;
  o.seed = seed;
  o.cardinalities = {20, 10000000, 3,      100, 1000, 5000, 100000, 50,      7,  2,  300,    1000000, 40,
                     10, 2000,     500000, 4,   800,  60,   5,      3000000, 25, 15, 200000, 90,      150000};
  return o;
}

SyntheticCtr Make(const SyntheticCtrOptions& options) {
  absl::StatusOr<SyntheticCtr> generator = SyntheticCtr::Create(options);
  EXPECT_TRUE(generator.ok()) << generator.status();
  return *std::move(generator);
}

// Chi-square of `counts` against `probabilities` (summing to 1) for `n` draws.
double ChiSquare(const std::vector<int64_t>& counts, const std::vector<double>& probabilities, int64_t n) {
  double chi2 = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probabilities[i] * static_cast<double>(n);
    chi2 += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) / expected;
  }
  return chi2;
}

// The chi-square value exceeded with probability 1e-6 at `df` degrees of
// freedom (Wilson and Hilferty's approximation; z = 4.753 for 1e-6).
double Critical(int df) {
  const double v = 2.0 / (9.0 * df);
  return df * std::pow(1 - v + 4.753 * std::sqrt(v), 3);
}

// Zipf's probabilities of ranks 0 .. n-1.
std::vector<double> ZipfProbabilities(uint64_t n, double s) {
  std::vector<double> p(n);
  double sum = 0;
  for (uint64_t r = 0; r < n; ++r) sum += p[r] = std::pow(static_cast<double>(r + 1), -s);
  for (double& x : p) x /= sum;
  return p;
}

bool SameExamples(const std::vector<CtrExample>& a, const std::vector<CtrExample>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].record == b[i].record) || a[i].probability != b[i].probability) return false;
  }
  return true;
}

TEST(SyntheticCtrTest, ExampleIDependsOnTheSeedAndIAlone) {
  const SyntheticCtr a = Make(TestOptions(7));
  const SyntheticCtr b = Make(TestOptions(7));
  const std::vector<CtrExample> whole = a.Generate(0, 400);
  EXPECT_TRUE(SameExamples(whole, b.Generate(0, 400)));
  const std::vector<CtrExample> slice(whole.begin() + 123, whole.begin() + 173);
  EXPECT_TRUE(SameExamples(b.Generate(123, 50), slice));
  EXPECT_EQ(b.Example(399).record, whole[399].record);

  const std::vector<CtrExample> other = Make(TestOptions(8)).Generate(0, 400);
  int same = 0;
  for (size_t i = 0; i < whole.size(); ++i) same += whole[i].record == other[i].record ? 1 : 0;
  EXPECT_LT(same, 4);
}

TEST(SyntheticCtrTest, RecordsHaveTheShapeTheOptionsAskFor) {
  const SyntheticCtr g = Make(TestOptions(3));
  const std::vector<CtrExample> examples = g.Generate(1000, 5000);
  std::set<uint64_t> c1_ids, c3_ids;
  for (uint64_t r = 0; r < 20; ++r) c1_ids.insert(g.IdOfRank(0, r));
  for (uint64_t r = 0; r < 3; ++r) c3_ids.insert(g.IdOfRank(2, r));
  int64_t dense_missing = 0, categorical_missing = 0, dense_present = 0;
  double dense_sum = 0;
  for (const CtrExample& e : examples) {
    ASSERT_TRUE(e.record.label == 0 || e.record.label == 1);
    ASSERT_TRUE(e.probability > 0 && e.probability < 1);
    for (const auto& x : e.record.dense) {
      if (!x) {
        ++dense_missing;
        continue;
      }
      ASSERT_GE(*x, 0);
      ++dense_present;
      dense_sum += static_cast<double>(*x);
    }
    for (const auto& c : e.record.categorical) categorical_missing += c ? 0 : 1;
    EXPECT_EQ(c1_ids.count(e.record.categorical[0].value_or(g.IdOfRank(0, 0))), 1u);
    EXPECT_EQ(c3_ids.count(e.record.categorical[2].value_or(g.IdOfRank(2, 0))), 1u);
    for (const auto& c : e.record.categorical) ASSERT_LT(c.value_or(0), uint64_t{1} << 32);
    // What is generated is what a file holds.
    absl::StatusOr<CriteoRecord> parsed = ParseCriteoLine(FormatCriteoLine(e.record));
    ASSERT_TRUE(parsed.ok() && *parsed == e.record);
  }
  EXPECT_NEAR(static_cast<double>(dense_missing) / (5000.0 * kNumDense), 0.1, 0.01);
  EXPECT_NEAR(static_cast<double>(categorical_missing) / (5000.0 * kNumCategorical), 0.02, 0.004);
  // floor(m X), X ~ Exp(1), is geometric with mean 1 / (e^(1/m) - 1).
  EXPECT_NEAR(dense_sum / static_cast<double>(dense_present), 1 / std::expm1(1 / 8.0), 0.15);
}

TEST(SyntheticCtrTest, AFeaturesIdsFollowZipfsLaw) {
  const SyntheticCtr g = Make(TestOptions(11));
  std::map<uint64_t, int> rank_of;
  for (int r = 0; r < 20; ++r) rank_of[g.IdOfRank(0, r)] = r;
  ASSERT_EQ(rank_of.size(), 20u) << "two ranks share an id";
  std::vector<int64_t> counts(20, 0);
  int64_t n = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    const std::optional<uint64_t> id = g.Example(i).record.categorical[0];
    if (!id) continue;
    ++counts[rank_of.at(*id)];
    ++n;
  }
  const std::vector<double> p = ZipfProbabilities(20, 1.05);
  EXPECT_LT(ChiSquare(counts, p, n), Critical(19));
  EXPECT_GT(ChiSquare(counts, ZipfProbabilities(20, 1.15), n), Critical(19)) << "the test cannot tell s = 1.15";
  EXPECT_NEAR(static_cast<double>(counts[0]) / static_cast<double>(n), p[0], 0.03 * p[0]);
}

TEST(ZipfSamplerTest, BothMethodsFollowZipfsLaw) {
  constexpr int64_t kDraws = 200000;
  for (ZipfSampler::Method method : {ZipfSampler::Method::kTable, ZipfSampler::Method::kRejectionInversion}) {
    for (double s : {0.5, 1.0, 1.05, 2.0}) {
      const ZipfSampler sampler(30, s, method);
      SplitMix64 rng(static_cast<uint64_t>(s * 100) + (method == ZipfSampler::Method::kTable ? 0 : 1000));
      std::vector<int64_t> counts(30, 0);
      for (int64_t i = 0; i < kDraws; ++i) {
        const uint64_t r = sampler.Sample(rng);
        ASSERT_LT(r, 30u);
        ++counts[r];
      }
      EXPECT_LT(ChiSquare(counts, ZipfProbabilities(30, s), kDraws), Critical(29)) << "s " << s;
      EXPECT_GT(ChiSquare(counts, ZipfProbabilities(30, s + 0.1), kDraws), Critical(29)) << "s " << s;
    }
  }
}

// Ten million ranks, no table: ranks 0-9 one by one, then [10, 1000),
// [1000, 10^6) and [10^6, 10^7) as bins, against sums over every rank.
TEST(ZipfSamplerTest, TenMillionRanksFollowZipfsLaw) {
  constexpr uint64_t kRanks = 10000000;
  constexpr double kS = 1.05;
  const std::vector<uint64_t> bin_ends = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1000, 1000000, kRanks};
  std::vector<double> p(bin_ends.size(), 0);
  double total = 0;
  for (uint64_t r = kRanks; r-- > 0;) {  // smallest terms first
    const double w = std::pow(static_cast<double>(r + 1), -kS);
    total += w;
    p[std::upper_bound(bin_ends.begin(), bin_ends.end(), r) - bin_ends.begin()] += w;
  }
  for (double& x : p) x /= total;
  const ZipfSampler sampler(kRanks, kS);
  SplitMix64 rng(99);
  constexpr int64_t kDraws = 300000;
  std::vector<int64_t> counts(bin_ends.size(), 0);
  for (int64_t i = 0; i < kDraws; ++i) {
    const uint64_t r = sampler.Sample(rng);
    ASSERT_LT(r, kRanks);
    ++counts[std::upper_bound(bin_ends.begin(), bin_ends.end(), r) - bin_ends.begin()];
  }
  EXPECT_LT(ChiSquare(counts, p, kDraws), Critical(static_cast<int>(bin_ends.size()) - 1));
  EXPECT_GT(counts.back(), kDraws / 20) << "the tail beyond 10^6 is reached";

  // 2^32 ranks: no per-rank memory, draws in range.
  const ZipfSampler huge(uint64_t{1} << 32, kS);
  for (int i = 0; i < 1000; ++i) ASSERT_LT(huge.Sample(rng), uint64_t{1} << 32);
}

TEST(SyntheticCtrTest, PositiveRateIsTheTarget) {
  for (double target : {0.25, 0.05}) {
    SyntheticCtrOptions o = TestOptions(21);
    o.target_positive_rate = target;
    const SyntheticCtr g = Make(o);
    double p_sum = 0, positives = 0;
    constexpr int kExamples = 20000;
    for (const CtrExample& e : g.Generate(50000, kExamples)) {
      p_sum += e.probability;
      positives += e.record.label;
    }
    EXPECT_NEAR(p_sum / kExamples, target, 0.1 * target) << target;
    EXPECT_NEAR(positives / kExamples, target, 0.15 * target) << target;
  }
}

// p = sigmoid(bias + sum_f w_f(C_f) + sum_j v_j log1p(I_j)) from the record.
TEST(SyntheticCtrTest, ProbabilitiesAreThePlantedModelsOfTheRecord) {
  const SyntheticCtr g = Make(TestOptions(5));
  for (const CtrExample& e : g.Generate(0, 200)) {
    double z = g.bias();
    for (int f = 0; f < kNumCategorical; ++f) {
      if (e.record.categorical[f]) z += g.CategoricalWeight(f, *e.record.categorical[f]);
    }
    for (int j = 0; j < kNumDense; ++j) {
      if (e.record.dense[j]) z += g.DenseWeight(j) * std::log1p(static_cast<double>(*e.record.dense[j]));
    }
    EXPECT_NEAR(e.probability, 1 / (1 + std::exp(-z)), 1e-12);
  }
  // w_f(id) has mean 0 and standard deviation weight_scale over ids.
  double sum = 0, sum2 = 0;
  constexpr int kIds = 20000;
  for (uint64_t id = 0; id < kIds; ++id) {
    const double w = g.CategoricalWeight(4, id * 7919);
    sum += w;
    sum2 += w * w;
  }
  EXPECT_NEAR(sum / kIds, 0, 0.01);
  EXPECT_NEAR(std::sqrt(sum2 / kIds), g.options().weight_scale, 0.03 * g.options().weight_scale);
}

// Multi-valued features: C1's bags hold 1 to 5 ids, C3's 1 to 3, the rest
// one; every length appears, the record's C_f is the bag's first id, and
// features of one id draw what they draw without bag_sizes.
SyntheticCtrOptions BagOptions(uint64_t seed) {
  SyntheticCtrOptions o = TestOptions(seed);
  o.bag_sizes.assign(kNumCategorical, 1);
  o.bag_sizes[0] = 5;
  o.bag_sizes[2] = 3;
  return o;
}

TEST(SyntheticCtrTest, BagsHoldOneToBagSizeIdsOfTheFeaturesLaw) {
  const SyntheticCtr g = Make(BagOptions(3));
  const SyntheticCtr one = Make(TestOptions(3));
  std::map<size_t, int> lengths;  // of C1's bags
  for (uint64_t i = 0; i < 3000; ++i) {
    const CtrExample e = g.Example(i);
    const CtrExample plain = one.Example(i);
    ASSERT_EQ(e.bags.begin[kNumCategorical], static_cast<int32_t>(e.bags.ids.size()));
    for (int f = 0; f < kNumCategorical; ++f) {
      const absl::Span<const uint64_t> bag = e.bags.bag(f);
      ASSERT_LE(bag.size(), static_cast<size_t>(g.options().bag_sizes[f])) << "C" << f + 1;
      ASSERT_EQ(bag.empty(), !e.record.categorical[f].has_value()) << "C" << f + 1;
      if (!bag.empty()) {
        ASSERT_EQ(bag[0], *e.record.categorical[f]);
      }
      if (g.options().bag_sizes[f] == 1) {
        ASSERT_EQ(e.record.categorical[f], plain.record.categorical[f]);
      }
    }
    EXPECT_EQ(e.record.dense, plain.record.dense);
    if (!e.bags.bag(0).empty()) ++lengths[e.bags.bag(0).size()];
  }
  ASSERT_EQ(lengths.size(), 5u);
  for (const auto& [length, count] : lengths) EXPECT_NEAR(count / 3000.0, 0.98 / 5, 0.03) << length;
  // Every id of a bag is one of the feature's: C3 has 3 ranks.
  std::set<uint64_t> c3;
  for (uint64_t i = 0; i < 3000; ++i) {
    const CtrExample e = g.Example(i);
    for (uint64_t id : e.bags.bag(2)) c3.insert(id);
  }
  EXPECT_EQ(c3, (std::set<uint64_t>{g.IdOfRank(2, 0), g.IdOfRank(2, 1), g.IdOfRank(2, 2)}));
}

// p = sigmoid(bias + sum_f mean_{id in bag f} w_f(id) + sum_j v_j log1p(I_j)).
TEST(SyntheticCtrTest, ABagsPlantedWeightIsTheMeanOfItsIds) {
  const SyntheticCtr g = Make(BagOptions(5));
  int long_bags = 0;
  for (const CtrExample& e : g.Generate(0, 300)) {
    double z = g.bias();
    for (int f = 0; f < kNumCategorical; ++f) {
      const absl::Span<const uint64_t> bag = e.bags.bag(f);
      double sum = 0;
      for (uint64_t id : bag) sum += g.CategoricalWeight(f, id);
      if (!bag.empty()) z += sum / static_cast<double>(bag.size());
      long_bags += bag.size() > 1;
    }
    for (int j = 0; j < kNumDense; ++j) {
      if (e.record.dense[j]) z += g.DenseWeight(j) * std::log1p(static_cast<double>(*e.record.dense[j]));
    }
    EXPECT_NEAR(e.probability, 1 / (1 + std::exp(-z)), 1e-12);
  }
  EXPECT_GT(long_bags, 300);
}

TEST(SyntheticCtrTest, PlantedAucIsWellAboveChance) {
  const SyntheticCtr g = Make(TestOptions(9));
  absl::StatusOr<double> auc = g.PlantedAuc(100000, 10000);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_GT(*auc, 0.7);
  EXPECT_LT(*auc, 0.99);
  std::vector<double> p;
  std::vector<float> labels;
  for (const CtrExample& e : g.Generate(100000, 10000)) {
    p.push_back(e.probability);
    labels.push_back(e.record.label);
  }
  EXPECT_EQ(*auc, *RocAuc(p, labels));
  EXPECT_EQ(g.PlantedAuc(5, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SyntheticCtrTest, WithoutWeightsNothingCanBeLearned) {
  SyntheticCtrOptions o = TestOptions(9);
  o.weight_scale = 0;
  o.dense_weight_scale = 0;
  const SyntheticCtr g = Make(o);
  absl::StatusOr<double> auc = g.PlantedAuc(0, 2000);
  ASSERT_TRUE(auc.ok()) << auc.status();
  EXPECT_EQ(*auc, 0.5);  // every probability the same: all pairs tied
  EXPECT_NEAR(g.Example(0).probability, 0.25, 1e-9);
}

TEST(SyntheticCtrTest, BadOptionsAreRefusedByName) {
  auto message = [](SyntheticCtrOptions o) {
    absl::StatusOr<SyntheticCtr> g = SyntheticCtr::Create(o);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(g.status().message());
  };
  SyntheticCtrOptions o = TestOptions(1);
  o.cardinalities.pop_back();
  EXPECT_THAT(message(o), HasSubstr("25 cardinalities, want 26"));
  o = TestOptions(1);
  o.cardinalities[4] = 0;
  EXPECT_THAT(message(o), HasSubstr("cardinality of C5 is 0"));
  o = BagOptions(1);
  o.bag_sizes[6] = 0;
  EXPECT_THAT(message(o), HasSubstr("bag size of C7 is 0, want 1 to 64"));
  o.bag_sizes[6] = 65;
  EXPECT_THAT(message(o), HasSubstr("bag size of C7 is 65"));
  o.bag_sizes.pop_back();
  EXPECT_THAT(message(o), HasSubstr("25 bag sizes, want none or 26"));
  o = TestOptions(1);
  o.zipf_s = 0;
  EXPECT_THAT(message(o), HasSubstr("zipf_s 0"));
  o = TestOptions(1);
  o.target_positive_rate = 1;
  EXPECT_THAT(message(o), HasSubstr("target_positive_rate 1"));
  o = TestOptions(1);
  o.dense_missing = 1.5;
  EXPECT_THAT(message(o), HasSubstr("dense_missing 1.5"));
  o = TestOptions(1);
  o.weight_scale = std::nan("");
  EXPECT_THAT(message(o), HasSubstr("weight_scale"));
}

}  // namespace
}  // namespace pstrain::criteo
