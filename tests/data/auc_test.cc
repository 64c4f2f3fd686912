// ROC AUC and log loss (common/data/criteo/auc.h) on cases worked by hand
// and, on random data with ties, against the definition: the share of
// (positive, negative) pairs ordered correctly, ties counting half.
#include "common/data/criteo/auc.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::criteo {
namespace {

using ::testing::HasSubstr;

double Auc(const std::vector<double>& scores, const std::vector<float>& labels) {
  absl::StatusOr<double> auc = RocAuc(scores, labels);
  EXPECT_TRUE(auc.ok()) << auc.status();
  return auc.value_or(-1);
}

TEST(AucTest, HandWorkedCases) {
  EXPECT_EQ(Auc({0.1, 0.2, 0.8, 0.9}, {0, 0, 1, 1}), 1.0);  // perfect
  EXPECT_EQ(Auc({0.9, 0.8, 0.2, 0.1}, {0, 0, 1, 1}), 0.0);  // reversed
  EXPECT_EQ(Auc({0.5, 0.5, 0.5, 0.5}, {0, 1, 0, 1}), 0.5);  // all tied
  // Pairs (pos, neg): (0.35, 0.1) right, (0.35, 0.4) wrong, (0.8, both) right: 3 of 4.
  EXPECT_EQ(Auc({0.1, 0.4, 0.35, 0.8}, {0, 0, 1, 1}), 0.75);
  // Positives 1 and 2, negative 1: one tie (1/2) and one win over 2 pairs.
  EXPECT_EQ(Auc({1, 1, 2}, {0, 1, 1}), 0.75);
  // 2 positives x 3 negatives; pos 3 beats negs 1, 2 and ties neg 3 (2.5); pos 0 beats none.
  EXPECT_DOUBLE_EQ(Auc({3, 0, 1, 2, 3}, {1, 1, 0, 0, 0}), 2.5 / 6);
  // The order of the input does not matter.
  EXPECT_EQ(Auc({2, 1, 1}, {1, 1, 0}), 0.75);
}

TEST(AucTest, FloatScoresGiveTheSame) {
  const std::vector<float> scores = {0.1f, 0.4f, 0.35f, 0.8f};
  const std::vector<float> labels = {0, 0, 1, 1};
  absl::StatusOr<double> auc = RocAuc(absl::Span<const float>(scores), labels);
  ASSERT_TRUE(auc.ok());
  EXPECT_EQ(*auc, 0.75);
}

// The definition, O(n^2).
double PairAuc(const std::vector<double>& scores, const std::vector<float>& labels) {
  double right = 0, pairs = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    for (size_t j = 0; j < scores.size(); ++j) {
      if (labels[i] != 1 || labels[j] != 0) continue;
      pairs += 1;
      right += scores[i] > scores[j] ? 1 : scores[i] == scores[j] ? 0.5 : 0;
    }
  }
  return right / pairs;
}

TEST(AucTest, EqualsThePairCountOnRandomDataWithTies) {
  std::mt19937_64 gen(5);
  for (int trial = 0; trial < 20; ++trial) {
    const size_t n = 50 + gen() % 400;
    const int levels = 2 + static_cast<int>(gen() % 30);  // few levels: many ties
    std::vector<double> scores(n);
    std::vector<float> labels(n);
    for (size_t i = 0; i < n; ++i) {
      labels[i] = static_cast<float>(gen() % 3 == 0);
      // Scores lean towards the label, so the AUC is not always near 0.5.
      scores[i] = static_cast<double>(gen() % levels) + (labels[i] == 1 ? static_cast<double>(gen() % 3) : 0);
    }
    labels[0] = 1;
    labels[1] = 0;
    EXPECT_NEAR(Auc(scores, labels), PairAuc(scores, labels), 1e-12) << "trial " << trial;
  }
}

TEST(AucTest, RefusesWhatHasNoAuc) {
  auto message = [](const std::vector<double>& s, const std::vector<float>& l) {
    absl::StatusOr<double> auc = RocAuc(s, l);
    EXPECT_EQ(auc.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(auc.status().message());
  };
  EXPECT_THAT(message({}, {}), HasSubstr("no examples"));
  EXPECT_THAT(message({0.1, 0.2}, {0}), HasSubstr("2 values for 1 labels"));
  EXPECT_THAT(message({0.1, 0.2}, {0, 0.5}), HasSubstr("label 1 is 0.5, not 0 or 1"));
  EXPECT_THAT(message({0.1, 0.2}, {1, 1}), HasSubstr("needs both classes; 2 positives and 0 negatives"));
  EXPECT_THAT(message({0.1, 0.2}, {0, 0}), HasSubstr("0 positives and 2 negatives"));
  EXPECT_THAT(message({0.1, std::nan("")}, {0, 1}), HasSubstr("score 1 is NaN"));
}

TEST(LogLossTest, KnownValues) {
  absl::StatusOr<double> half = LogLoss({0.5, 0.5, 0.5}, {0, 1, 1});
  ASSERT_TRUE(half.ok());
  EXPECT_DOUBLE_EQ(*half, std::log(2.0));
  absl::StatusOr<double> two = LogLoss({0.9, 0.2}, {1, 0});
  ASSERT_TRUE(two.ok());
  EXPECT_DOUBLE_EQ(*two, -(std::log(0.9) + std::log(0.8)) / 2);
  // Certain and wrong: clamped to 1e-7, so finite.
  absl::StatusOr<double> wrong = LogLoss({0.0, 1.0}, {1, 0});
  ASSERT_TRUE(wrong.ok());
  EXPECT_NEAR(*wrong, -std::log(1e-7), 1e-9);
  // Certain and right: clamped to 1 - 1e-7.
  absl::StatusOr<double> right = LogLoss({1.0, 0.0}, {1, 0});
  ASSERT_TRUE(right.ok());
  EXPECT_NEAR(*right, 1e-7, 1e-12);
  EXPECT_GT(*right, 0);
  // One class is fine for log loss.
  EXPECT_TRUE(LogLoss({0.3}, {1}).ok());
}

TEST(LogLossTest, RefusesBadInput) {
  EXPECT_EQ(LogLoss({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(LogLoss({0.5}, {0, 1}).status().message()), HasSubstr("1 values for 2 labels"));
  EXPECT_THAT(std::string(LogLoss({0.5}, {2}).status().message()), HasSubstr("label 0 is 2"));
  EXPECT_THAT(std::string(LogLoss({0.5, 1.5}, {0, 1}).status().message()), HasSubstr("probability 1 is 1.5"));
  EXPECT_THAT(std::string(LogLoss({-0.1}, {0}).status().message()), HasSubstr("outside [0, 1]"));
  EXPECT_EQ(LogLoss({std::nan("")}, {0}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::criteo
