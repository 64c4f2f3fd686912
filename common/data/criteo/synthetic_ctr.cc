#include "common/data/criteo/synthetic_ctr.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/data/criteo/auc.h"
#include "glog/logging.h"

namespace pstrain::criteo {
namespace {

// Streams of the seed, one per purpose.
enum Stream : uint64_t { kExamples = 1, kCalibration, kIds, kWeights, kDenseWeights };

// log1p(x) / x, continuous at 0.
double Helper1(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x * (0.5 - x * (1.0 / 3 - 0.25 * x)); }

// expm1(x) / x, continuous at 0.
double Helper2(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x * 0.5 * (1 + x / 3 * (1 + 0.25 * x)); }

// Uniform with mean 0 and standard deviation 1 from u in [0, 1).
double Centered(double u) { return std::sqrt(3.0) * (2 * u - 1); }

double Uniform01(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

double Sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

absl::Status OptionError(const char* name, double value, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat("synthetic CTR: ", name, " ", value, ": want ", want));
}

// INVALID_ARGUMENT naming the first option outside its range (NaN included).
absl::Status CheckOptions(const SyntheticCtrOptions& o) {
  if (o.cardinalities.size() != kNumCategorical) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic CTR: ", o.cardinalities.size(), " cardinalities, want ",
                                                   kNumCategorical, " (one per categorical feature)"));
  }
  for (size_t f = 0; f < o.cardinalities.size(); ++f) {
    if (o.cardinalities[f] < 1 || o.cardinalities[f] > (uint64_t{1} << 32)) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic CTR: cardinality of C", f + 1, " is ", o.cardinalities[f], ", want 1 to 2^32"));
    }
  }
  if (!(o.zipf_s > 0 && std::isfinite(o.zipf_s))) return OptionError("zipf_s", o.zipf_s, "> 0");
  if (!(o.weight_scale >= 0 && std::isfinite(o.weight_scale))) {
    return OptionError("weight_scale", o.weight_scale, ">= 0");
  }
  if (!(o.dense_weight_scale >= 0 && std::isfinite(o.dense_weight_scale))) {
    return OptionError("dense_weight_scale", o.dense_weight_scale, ">= 0");
  }
  if (!(o.dense_mean > 0 && o.dense_mean <= 1e12)) return OptionError("dense_mean", o.dense_mean, "in (0, 1e12]");
  if (!(o.dense_missing >= 0 && o.dense_missing <= 1)) {
    return OptionError("dense_missing", o.dense_missing, "in [0, 1]");
  }
  if (!(o.categorical_missing >= 0 && o.categorical_missing <= 1)) {
    return OptionError("categorical_missing", o.categorical_missing, "in [0, 1]");
  }
  if (!(o.target_positive_rate > 0 && o.target_positive_rate < 1)) {
    return OptionError("target_positive_rate", o.target_positive_rate, "in (0, 1)");
  }
  if (!o.bag_sizes.empty() && o.bag_sizes.size() != kNumCategorical) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic CTR: ", o.bag_sizes.size(), " bag sizes, want none or ",
                                                   kNumCategorical, " (one per categorical feature)"));
  }
  for (size_t f = 0; f < o.bag_sizes.size(); ++f) {
    if (o.bag_sizes[f] < 1 || o.bag_sizes[f] > kMaxBagSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic CTR: bag size of C", f + 1, " is ", o.bag_sizes[f], ", want 1 to ", kMaxBagSize));
    }
  }
  if (o.calibration_examples < 1) {
    return OptionError("calibration_examples", static_cast<double>(o.calibration_examples), ">= 1");
  }
  return absl::OkStatus();
}

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double s, Method method) : n_(n), s_(s) {
  CHECK(n >= 1 && n <= (uint64_t{1} << 53)) << "Zipf: n " << n << " outside [1, 2^53]";
  CHECK(s > 0 && std::isfinite(s)) << "Zipf: exponent " << s << " is not positive";
  if (method == Method::kAuto) method = n <= kMaxTable ? Method::kTable : Method::kRejectionInversion;
  if (method == Method::kTable) {
    CHECK(n <= kMaxTable) << "Zipf: a table of " << n << " ranks";
    cumulative_.resize(n);
    double sum = 0;
    for (uint64_t r = 0; r < n; ++r) cumulative_[r] = sum += std::pow(static_cast<double>(r + 1), -s);
    return;
  }
  h_integral_x1_ = HIntegral(1.5) - 1;
  h_integral_n_ = HIntegral(static_cast<double>(n) + 0.5);
  squeeze_ = 2 - HIntegralInverse(HIntegral(2.5) - Density(2));
}

double ZipfSampler::Density(double x) const { return std::exp(-s_ * std::log(x)); }

// (x^(1-s) - 1) / (1 - s), or log(x) when s = 1.
double ZipfSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1 - s_) * log_x) * log_x;
}

double ZipfSampler::HIntegralInverse(double x) const {
  const double t = std::max(x * (1 - s_), -1.0);
  return std::exp(Helper1(t) * x);
}

uint64_t ZipfSampler::Sample(SplitMix64& rng) const {
  if (!cumulative_.empty()) {
    const double target = rng.Uniform01() * cumulative_.back();
    const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
    return std::min<uint64_t>(static_cast<uint64_t>(it - cumulative_.begin()), n_ - 1);
  }
  // Hörmann & Derflinger (1996), as in Apache Commons RNG's
  // RejectionInversionZipfSampler: ranks 1..n here, returned less one.
  for (;;) {
    const double u = h_integral_n_ + rng.Uniform01() * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    const double k = std::clamp(std::floor(x + 0.5), 1.0, static_cast<double>(n_));
    if (k - x <= squeeze_ || u >= HIntegral(k + 0.5) - Density(k)) return static_cast<uint64_t>(k) - 1;
  }
}

SyntheticCtr::SyntheticCtr(SyntheticCtrOptions options) : options_(std::move(options)) {
  const uint64_t seed = options_.seed;
  examples_key_ = DeriveSeed(seed, kExamples);
  calibration_key_ = DeriveSeed(seed, kCalibration);
  id_key_ = DeriveSeed(seed, kIds);
  weight_key_ = DeriveSeed(seed, kWeights);
  for (uint64_t cardinality : options_.cardinalities) samplers_.emplace_back(cardinality, options_.zipf_s);
  for (int j = 0; j < kNumDense; ++j) {
    SplitMix64 rng(DeriveSeed(DeriveSeed(seed, kDenseWeights), j));
    dense_weights_.push_back(options_.dense_weight_scale * Centered(rng.Uniform01()));
  }
}

absl::StatusOr<SyntheticCtr> SyntheticCtr::Create(SyntheticCtrOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  SyntheticCtr generator(std::move(options));
  generator.CalibrateBias();
  return generator;
}

uint64_t SyntheticCtr::IdOfRank(int feature, uint64_t rank) const {
  return MixBits(DeriveSeed(id_key_, static_cast<uint64_t>(feature)) ^ rank) >> 32;
}

double SyntheticCtr::CategoricalWeight(int feature, uint64_t id) const {
  const uint64_t bits = MixBits(DeriveSeed(weight_key_, static_cast<uint64_t>(feature)) ^ id);
  return options_.weight_scale * Centered(Uniform01(bits));
}

// Each feature draws from a stream of its own (slot j of the example's key),
// so the features do not shift one another's draws.
double SyntheticCtr::DrawFeatures(uint64_t key, CtrExample* example) const {
  CriteoRecord& record = example->record;
  double z = 0;
  for (int j = 0; j < kNumDense; ++j) {
    SplitMix64 rng(DeriveSeed(key, static_cast<uint64_t>(j)));
    if (rng.Uniform01() < options_.dense_missing) continue;
    const double x = std::floor(options_.dense_mean * -std::log1p(-rng.Uniform01()));
    record.dense[j] = static_cast<int64_t>(x);
    z += dense_weights_[j] * std::log1p(x);
  }
  CtrBags& bags = example->bags;
  bags.ids.reserve(kNumCategorical);
  for (int f = 0; f < kNumCategorical; ++f) {
    bags.begin[f] = static_cast<int32_t>(bags.ids.size());
    SplitMix64 rng(DeriveSeed(key, static_cast<uint64_t>(kNumDense + f)));
    if (rng.Uniform01() < options_.categorical_missing) continue;
    z += DrawBag(f, rng, &bags.ids);
    record.categorical[f] = bags.ids[bags.begin[f]];
  }
  bags.begin[kNumCategorical] = static_cast<int32_t>(bags.ids.size());
  return z;
}

// A bag of one draws its id alone (the stream of a one-id feature does not
// depend on bag_sizes); a longer bag draws its length first.
double SyntheticCtr::DrawBag(int f, SplitMix64& rng, std::vector<uint64_t>* ids) const {
  const int most = BagSize(f);
  const int n = most == 1 ? 1 : 1 + std::min(most - 1, static_cast<int>(rng.Uniform01() * most));
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const uint64_t id = IdOfRank(f, samplers_[f].Sample(rng));
    ids->push_back(id);
    sum += CategoricalWeight(f, id);
  }
  return sum / n;
}

// Bisection on the bias for mean sigmoid(bias + logit) = the target over the
// calibration stream's examples (the mean rises with the bias).
void SyntheticCtr::CalibrateBias() {
  std::vector<double> logits(static_cast<size_t>(options_.calibration_examples));
  for (size_t i = 0; i < logits.size(); ++i) {
    CtrExample example;
    logits[i] = DrawFeatures(DeriveSeed(calibration_key_, i), &example);
  }
  double lo = -100, hi = 100;
  for (int iteration = 0; iteration < 100 && hi - lo > 1e-12; ++iteration) {
    const double mid = (lo + hi) / 2;
    double sum = 0;
    for (double z : logits) sum += Sigmoid(mid + z);
    if (sum / static_cast<double>(logits.size()) < options_.target_positive_rate) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  bias_ = (lo + hi) / 2;
}

CtrExample SyntheticCtr::Example(uint64_t index) const {
  const uint64_t key = DeriveSeed(examples_key_, index);
  CtrExample example;
  const double logit = DrawFeatures(key, &example);
  example.probability = Sigmoid(bias_ + logit);
  SplitMix64 label_rng(DeriveSeed(key, kNumFields));
  example.record.label = label_rng.Uniform01() < example.probability ? 1.0f : 0.0f;
  return example;
}

std::vector<CtrExample> SyntheticCtr::Generate(uint64_t first, uint64_t count) const {
  std::vector<CtrExample> examples;
  examples.reserve(count);
  for (uint64_t i = 0; i < count; ++i) examples.push_back(Example(first + i));
  return examples;
}

absl::StatusOr<double> SyntheticCtr::PlantedAuc(uint64_t first, uint64_t count) const {
  if (count == 0) return absl::InvalidArgumentError("synthetic CTR: planted AUC of no examples");
  std::vector<double> probabilities;
  std::vector<float> labels;
  probabilities.reserve(count);
  labels.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    const CtrExample example = Example(first + i);
    probabilities.push_back(example.probability);
    labels.push_back(example.record.label);
  }
  absl::StatusOr<double> auc = RocAuc(probabilities, labels);
  if (!auc.ok()) return absl::InvalidArgumentError(absl::StrCat("synthetic CTR: ", auc.status().message()));
  return auc;
}

}  // namespace pstrain::criteo
