#include "common/data/criteo/ctr_dataset.h"

#include <algorithm>
#include <array>

#include "common/data/criteo/criteo_reader.h"
#include "glog/logging.h"

namespace pstrain::criteo {

Dataset MakeCtrDataset(int64_t num_examples, int bag_size) {
  CHECK_GE(num_examples, 0);
  CHECK_GE(bag_size, 1);
  Dataset data;
  data.num_examples = num_examples;
  data.example_shape = Shape{1, 1, kNumDense};
  data.num_classes = 2;
  data.sparse_features = kNumCategorical;
  data.bag_size = bag_size;
  const size_t n = static_cast<size_t>(num_examples);
  data.images.resize(n * kNumDense);
  data.labels.resize(n);
  data.sparse_ids.assign(n * kNumCategorical * bag_size, Dataset::kMissingId);
  return data;
}

void SetCtrExample(const CriteoRecord& record, int64_t index, Dataset* data) {
  CHECK(index >= 0 && index < data->num_examples) << "example " << index << " of " << data->num_examples;
  const size_t i = static_cast<size_t>(index);
  const std::array<float, kNumDense> dense = TransformDense(record);
  std::copy(dense.begin(), dense.end(), data->images.begin() + i * kNumDense);
  data->labels[i] = record.label == 1 ? 1 : 0;
  const int bag = data->bag_size;
  uint64_t* ids = data->sparse_ids.data() + i * kNumCategorical * bag;
  for (int f = 0; f < kNumCategorical; ++f) ids[f * bag] = record.categorical[f].value_or(Dataset::kMissingId);
}

void SetCtrBags(const CtrBags& bags, int64_t index, Dataset* data) {
  CHECK(index >= 0 && index < data->num_examples) << "example " << index << " of " << data->num_examples;
  const int size = data->bag_size;
  uint64_t* ids = data->sparse_ids.data() + static_cast<size_t>(index) * kNumCategorical * size;
  for (int f = 0; f < kNumCategorical; ++f) {
    const absl::Span<const uint64_t> bag = bags.bag(f);
    CHECK_LE(bag.size(), static_cast<size_t>(size)) << "bag of C" << f + 1;
    uint64_t* out = ids + f * size;
    std::copy(bag.begin(), bag.end(), out);
    std::fill(out + bag.size(), out + size, Dataset::kMissingId);
  }
}

void AppendCtrExample(const CriteoRecord& record, Dataset* data) {
  const size_t n = static_cast<size_t>(++data->num_examples);
  data->images.resize(n * kNumDense);
  data->labels.resize(n);
  data->sparse_ids.resize(n * kNumCategorical * data->bag_size, Dataset::kMissingId);
  SetCtrExample(record, data->num_examples - 1, data);
}

}  // namespace pstrain::criteo
