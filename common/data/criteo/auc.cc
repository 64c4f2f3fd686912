#include "common/data/criteo/auc.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain::criteo {
namespace {

// Sizes equal and non-zero, every label 0 or 1.
absl::Status CheckLabels(const char* what, size_t values, absl::Span<const float> labels) {
  if (values != labels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", values, " values for ", labels.size(), " labels"));
  }
  if (labels.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no examples"));
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] != 0 && labels[i] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": label ", i, " is ", labels[i], ", not 0 or 1"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> RocAuc(absl::Span<const double> scores, absl::Span<const float> labels) {
  if (absl::Status s = CheckLabels("AUC", scores.size(), labels); !s.ok()) return s;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (std::isnan(scores[i])) return absl::InvalidArgumentError(absl::StrCat("AUC: score ", i, " is NaN"));
  }
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Over groups of equal scores, lowest first: each positive beats every
  // negative below its group and ties with the negatives in it.
  uint64_t negatives_below = 0;
  uint64_t positives = 0;
  unsigned __int128 twice_wins = 0;  // 2 x (wins + ties / 2)
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    uint64_t group_positives = 0;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) {
      group_positives += labels[order[end]] == 1 ? 1 : 0;
      ++end;
    }
    const uint64_t group_negatives = (end - begin) - group_positives;
    twice_wins += static_cast<unsigned __int128>(group_positives) * (2 * negatives_below + group_negatives);
    negatives_below += group_negatives;
    positives += group_positives;
    begin = end;
  }
  if (positives == 0 || negatives_below == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("AUC: needs both classes; ", positives, " positives and ", negatives_below, " negatives"));
  }
  const long double pairs = static_cast<long double>(positives) * static_cast<long double>(negatives_below);
  return static_cast<double>(static_cast<long double>(twice_wins) / (2 * pairs));
}

absl::StatusOr<double> RocAuc(absl::Span<const float> scores, absl::Span<const float> labels) {
  const std::vector<double> wide(scores.begin(), scores.end());
  return RocAuc(absl::Span<const double>(wide), labels);
}

absl::StatusOr<double> LogLoss(absl::Span<const double> probabilities, absl::Span<const float> labels) {
  if (absl::Status s = CheckLabels("log loss", probabilities.size(), labels); !s.ok()) return s;
  constexpr double kEpsilon = 1e-7;
  double sum = 0;
  for (size_t i = 0; i < probabilities.size(); ++i) {
    const double p = probabilities[i];
    if (!(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("log loss: probability ", i, " is ", p, ", outside [0, 1]"));
    }
    const double clamped = std::clamp(p, kEpsilon, 1 - kEpsilon);
    sum -= labels[i] == 1 ? std::log(clamped) : std::log1p(-clamped);
  }
  return sum / static_cast<double>(probabilities.size());
}

}  // namespace pstrain::criteo
