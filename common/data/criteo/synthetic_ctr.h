// Synthetic click logs shaped like Criteo's (criteo_record.h), with a
// planted model, so a CTR model's test AUC can be judged against the best
// achievable one.
//
// Example i depends only on (options, i): any range of indices is generated
// alone (a train/test split is two index ranges) and gives the same records
// on every machine -- the draws come from counter-based SplitMix64 streams,
// never from std distributions (docs/DATA.md, "Criteo click logs and
// synthetic CTR data", for the one caveat: libm's rounding).
//
//   categorical C_f: missing with probability categorical_missing; else a bag
//     of n ids, n uniform in [1, bag_sizes_f] (1 when bag_sizes is empty),
//     each a rank r in [0, cardinality_f) from Zipf's law
//     P(r) ~ (r + 1)^-zipf_s, written as the 32-bit id IdOfRank(f, r), a hash
//     of (seed, f, r): frequent ids are not small numbers. The record's C_f
//     is the bag's first id
//   dense I_j: missing with probability dense_missing; else
//     floor(dense_mean * Exp(1)), a non-negative integer
//   label: 1 with probability p = sigmoid(bias + sum_f mean_{id in bag f} w_f(id)
//     + sum_j v_j log1p(I_j)), missing features adding 0; w_f(id) and v_j
//     uniform with standard deviation weight_scale and dense_weight_scale,
//     each fixed by (seed, f, id) or (seed, j); the bias is set at Create so
//     the mean of p is target_positive_rate.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/data/criteo/criteo_record.h"
#include "common/data/portable_random.h"

namespace pstrain::criteo {

// A counter-based stream of 64-bit values (SplitMix64 from `key`).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t key) : state_(key) {}
  uint64_t Next() { return MixBits(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform in [0, 1), 53 random bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// Zipf's law over ranks 0 .. n-1: P(r) = (r + 1)^-s / sum_{k=1..n} k^-s.
// Exact sampling: inversion of a table of the cumulative weights (n <=
// kMaxTable), or Hörmann and Derflinger's rejection-inversion (any n up to
// 2^53, no per-rank memory, a few uniforms per draw).
class ZipfSampler {
 public:
  enum class Method { kAuto, kTable, kRejectionInversion };
  static constexpr uint64_t kMaxTable = 4096;

  // CHECK-fails unless 1 <= n <= 2^53, s > 0 and finite, and n <= kMaxTable
  // for kTable. kAuto: the table when n <= kMaxTable.
  ZipfSampler(uint64_t n, double s, Method method = Method::kAuto);

  uint64_t Sample(SplitMix64& rng) const;
  uint64_t n() const { return n_; }

 private:
  // Rejection-inversion's density h(x) = x^-s, its integral H and H's inverse.
  double Density(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  uint64_t n_;
  double s_;
  std::vector<double> cumulative_;  // table method: sum of (k + 1)^-s for k <= r
  double h_integral_x1_ = 0, h_integral_n_ = 0, squeeze_ = 0;
};

struct SyntheticCtrOptions {
  uint64_t seed = 0;
  // kNumCategorical values, each in [1, 2^32].
  std::vector<uint64_t> cardinalities;
  double zipf_s = 1.05;                  // > 0
  double weight_scale = 0.3;             // >= 0: standard deviation of w_f(id)
  double dense_weight_scale = 0.1;       // >= 0: standard deviation of v_j
  double dense_mean = 8;                 // in (0, 1e12]
  double dense_missing = 0.1;            // in [0, 1]
  double categorical_missing = 0.02;     // in [0, 1]
  double target_positive_rate = 0.25;    // in (0, 1)
  int64_t calibration_examples = 16384;  // >= 1: examples (of a stream of their own) the bias is fitted on
  // Empty (one id per feature) or kNumCategorical values, each in
  // [1, kMaxBagSize]: the most ids feature f's bag holds.
  std::vector<int> bag_sizes;
};

inline constexpr int kMaxBagSize = 64;

// Each categorical feature's ids (one allocation per example); an empty bag
// is a missing feature.
struct CtrBags {
  std::vector<uint64_t> ids;                         // bag 0's ids, then bag 1's, ...
  std::array<int32_t, kNumCategorical + 1> begin{};  // bag f is ids[begin[f], begin[f + 1])

  absl::Span<const uint64_t> bag(int f) const {
    return absl::MakeConstSpan(ids).subspan(begin[f], begin[f + 1] - begin[f]);
  }
};

struct CtrExample {
  CriteoRecord record;     // C_f: the first id of bag f
  CtrBags bags;            // every id of every feature
  double probability = 0;  // the planted P(label = 1 | bags, dense features)
};

class SyntheticCtr {
 public:
  // INVALID_ARGUMENT naming the option outside the ranges above.
  static absl::StatusOr<SyntheticCtr> Create(SyntheticCtrOptions options);

  CtrExample Example(uint64_t index) const;
  // Examples first .. first + count - 1.
  std::vector<CtrExample> Generate(uint64_t first, uint64_t count) const;
  // RocAuc of the planted probabilities for the labels of examples first ..
  // first + count - 1: the best test AUC any model can expect there.
  // INVALID_ARGUMENT when count is 0 or the labels are of one class.
  absl::StatusOr<double> PlantedAuc(uint64_t first, uint64_t count) const;

  // The planted model, as the header comment states it.
  uint64_t IdOfRank(int feature, uint64_t rank) const;
  double CategoricalWeight(int feature, uint64_t id) const;
  double DenseWeight(int j) const { return dense_weights_[j]; }
  double bias() const { return bias_; }
  const SyntheticCtrOptions& options() const { return options_; }

 private:
  explicit SyntheticCtr(SyntheticCtrOptions options);
  // The features of the example whose stream key is `key` (no label), into
  // `example`'s record and bags; returns its logit less the bias.
  double DrawFeatures(uint64_t key, CtrExample* example) const;
  // Appends bag `f` of the example (stream `rng`) to `ids`; returns its
  // planted logit term.
  double DrawBag(int f, SplitMix64& rng, std::vector<uint64_t>* ids) const;
  int BagSize(int f) const { return options_.bag_sizes.empty() ? 1 : options_.bag_sizes[f]; }
  void CalibrateBias();

  SyntheticCtrOptions options_;
  std::vector<ZipfSampler> samplers_;
  std::vector<double> dense_weights_;
  uint64_t examples_key_, calibration_key_, id_key_, weight_key_;
  double bias_ = 0;
};

}  // namespace pstrain::criteo
