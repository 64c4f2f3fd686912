#include "common/data/criteo/synthetic_ctr_config.h"

#include <cstdint>
#include <vector>

namespace pstrain::criteo {
namespace {

// data.ctr.cardinalities, else those of model.tables.
std::vector<uint64_t> Cardinalities(const ExperimentConfig& config) {
  const CtrDataConfig& ctr = config.data().ctr();
  if (ctr.cardinalities_size() > 0) return {ctr.cardinalities().begin(), ctr.cardinalities().end()};
  std::vector<uint64_t> out;
  for (const EmbeddingTableConfig& t : config.model().tables()) out.push_back(static_cast<uint64_t>(t.cardinality()));
  return out;
}

}  // namespace

SyntheticCtrOptions SyntheticCtrOptionsOf(const ExperimentConfig& config) {
  const CtrDataConfig& ctr = config.data().ctr();
  SyntheticCtrOptions o;
  o.seed = ctr.seed();
  o.cardinalities = Cardinalities(config);
  o.zipf_s = ctr.zipf_s();
  o.weight_scale = ctr.weight_scale();
  o.dense_weight_scale = ctr.dense_weight_scale();
  o.target_positive_rate = ctr.target_positive_rate();
  o.categorical_missing = ctr.categorical_missing();
  o.dense_missing = ctr.dense_missing();
  o.bag_sizes.assign(ctr.bag_sizes().begin(), ctr.bag_sizes().end());
  return o;
}

}  // namespace pstrain::criteo
