// synthetic_ctr: Criteo-shaped click logs from a planted logistic model with
// Zipf ids (common/data/criteo/synthetic_ctr.h), sized and shaped by
// data.ctr. Training examples are the generator's [0, train_examples), test
// examples the next test_examples: two disjoint ranges of one generator, so
// the test ids follow the training ids' distribution. Layout:
// common/data/criteo/ctr_dataset.h, bags as long as the longest of
// data.ctr.bag_sizes. Each split's planted_auc is the planted
// model's AUC over its own examples (NaN when they are of one class).
#include "common/data/criteo/synthetic_ctr.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/data/criteo/auc.h"
#include "common/data/criteo/ctr_dataset.h"
#include "common/data/criteo/synthetic_ctr_config.h"
#include "common/data/data_source.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr uint64_t kMaxCardinality = uint64_t{1} << 32;
// Fewer examples than this per thread are not worth a thread.
constexpr int64_t kMinExamplesPerThread = 8192;

absl::Status CheckCardinalities(const ExperimentConfig& config, const ConfigChecker& ck) {
  const CtrDataConfig& ctr = config.data().ctr();
  const std::string range = absl::StrCat("[1, ", kMaxCardinality, "]");
  if (ctr.cardinalities_size() > 0) {
    if (ctr.cardinalities_size() != criteo::kNumCategorical) {
      return ck.Fail("data.ctr.cardinalities",
                     absl::StrCat(criteo::kNumCategorical, " values (one per categorical feature) or none"),
                     absl::StrCat(ctr.cardinalities_size(), " values"));
    }
    for (int f = 0; f < ctr.cardinalities_size(); ++f) {
      const uint64_t c = ctr.cardinalities(f);
      if (c < 1 || c > kMaxCardinality) {
        return ck.Fail(absl::StrCat("data.ctr.cardinalities[", f, "]"), absl::StrCat("a number in ", range),
                       absl::StrCat(c));
      }
    }
    return absl::OkStatus();
  }
  const ModelConfig& m = config.model();
  if (m.tables_size() != criteo::kNumCategorical) {
    return ck.Fail(
        "model.tables",
        absl::StrCat(criteo::kNumCategorical,
                     " fixed-size tables, one per categorical feature, while data.ctr.cardinalities is empty"),
        absl::StrCat(m.tables_size(), " tables"));
  }
  for (int f = 0; f < m.tables_size(); ++f) {
    const int64_t c = m.tables(f).cardinality();
    if (c < 1 || static_cast<uint64_t>(c) > kMaxCardinality) {
      return ck.Fail(absl::StrCat("model.tables[", f, "].cardinality"),
                     absl::StrCat("a fixed-size table's cardinality in ", range,
                                  " (it sets the feature's ids while data.ctr.cardinalities is empty)"),
                     absl::StrCat(c));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBagSizes(const CtrDataConfig& ctr, const ConfigChecker& ck) {
  if (ctr.bag_sizes_size() != 0 && ctr.bag_sizes_size() != criteo::kNumCategorical) {
    return ck.Fail("data.ctr.bag_sizes",
                   absl::StrCat(criteo::kNumCategorical, " values (one per categorical feature) or none"),
                   absl::StrCat(ctr.bag_sizes_size(), " values"));
  }
  for (int f = 0; f < ctr.bag_sizes_size(); ++f) {
    PSTRAIN_RETURN_IF_ERROR(
        ck.InRange(absl::StrCat("data.ctr.bag_sizes[", f, "]"), ctr.bag_sizes(f), 1, true, criteo::kMaxBagSize, true));
  }
  return absl::OkStatus();
}

absl::Status Check(const ExperimentConfig& config, const ConfigChecker& ck) {
  const CtrDataConfig& ctr = config.data().ctr();
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.ctr.train_examples", ctr.train_examples()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.ctr.test_examples", ctr.test_examples()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.ctr.zipf_s", ctr.zipf_s()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("data.ctr.weight_scale", ctr.weight_scale()));
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("data.ctr.dense_weight_scale", ctr.dense_weight_scale()));
  PSTRAIN_RETURN_IF_ERROR(
      ck.InRange("data.ctr.target_positive_rate", ctr.target_positive_rate(), 0.0, false, 1.0, false));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange("data.ctr.categorical_missing", ctr.categorical_missing(), 0.0, true, 1.0, true));
  PSTRAIN_RETURN_IF_ERROR(ck.InRange("data.ctr.dense_missing", ctr.dense_missing(), 0.0, true, 1.0, true));
  PSTRAIN_RETURN_IF_ERROR(CheckBagSizes(ctr, ck));
  return CheckCardinalities(config, ck);
}

// Examples [first, first + count) of `generator`, on up to the machine's
// cores (each example depends only on its index).
Dataset Generate(const criteo::SyntheticCtr& generator, uint64_t first, int64_t count) {
  const std::vector<int>& sizes = generator.options().bag_sizes;
  const int bag_size = sizes.empty() ? 1 : *std::max_element(sizes.begin(), sizes.end());
  Dataset data = criteo::MakeCtrDataset(count, bag_size);
  std::vector<double> probabilities(static_cast<size_t>(count));
  const auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const criteo::CtrExample example = generator.Example(first + static_cast<uint64_t>(i));
      criteo::SetCtrExample(example.record, i, &data);
      if (bag_size > 1) criteo::SetCtrBags(example.bags, i, &data);
      probabilities[static_cast<size_t>(i)] = example.probability;
    }
  };
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::clamp<int64_t>(count / kMinExamplesPerThread, 1, cores);
  std::vector<std::thread> workers;
  for (int64_t t = 1; t < threads; ++t) workers.emplace_back(fill, count * t / threads, count * (t + 1) / threads);
  fill(0, count / threads);
  for (std::thread& w : workers) w.join();
  const std::vector<float> labels(data.labels.begin(), data.labels.end());
  if (absl::StatusOr<double> auc = criteo::RocAuc(probabilities, labels); auc.ok()) data.planted_auc = *auc;
  return data;
}

absl::StatusOr<Datasets> Load(const ExperimentConfig& config, bool with_test) {
  PSTRAIN_RETURN_IF_ERROR(Check(config, ConfigChecker("data.source synthetic_ctr")));
  PSTRAIN_ASSIGN_OR_RETURN(const criteo::SyntheticCtr generator,
                           criteo::SyntheticCtr::Create(criteo::SyntheticCtrOptionsOf(config)));
  const CtrDataConfig& ctr = config.data().ctr();
  Datasets data;
  data.train = Generate(generator, 0, ctr.train_examples());
  if (with_test) data.test = Generate(generator, static_cast<uint64_t>(ctr.train_examples()), ctr.test_examples());
  return data;
}

const bool kRegistered = DataSourceRegistry().Register("synthetic_ctr", {Load, Check});

}  // namespace
}  // namespace pstrain
