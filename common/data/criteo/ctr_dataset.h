// Click logs as a Dataset (common/data/dataset.h), the layout the CTR data
// sources (data.source criteo and synthetic_ctr) share: example_shape
// [1, 1, 13] holding TransformDense of I1-I13, labels 0/1 (num_classes 2),
// and 26 bags of sparse ids per example, C1-C26: one id each (a bag_size of
// 1, Dataset::kMissingId where missing), or for generated multi-valued
// features up to bag_size ids each (SetCtrBags).
#pragma once

#include <cstdint>

#include "common/data/criteo/criteo_record.h"
#include "common/data/criteo/synthetic_ctr.h"
#include "common/data/dataset.h"

namespace pstrain::criteo {

// A dataset of `num_examples` zeroed examples in the layout above, every
// bag missing (CHECK: num_examples >= 0, bag_size >= 1).
Dataset MakeCtrDataset(int64_t num_examples, int bag_size = 1);

// Writes `record` as example `index` of `data` (made by MakeCtrDataset;
// CHECK: index in range). Examples are independent: threads may write
// distinct indices at once.
void SetCtrExample(const CriteoRecord& record, int64_t index, Dataset* data);

// Replaces example `index`'s sparse ids by `bags` (CHECK: no bag longer
// than data->bag_size), the record written by SetCtrExample.
void SetCtrBags(const CtrBags& bags, int64_t index, Dataset* data);

// Adds `record` as a new last example of `data` (made by MakeCtrDataset).
void AppendCtrExample(const CriteoRecord& record, Dataset* data);

}  // namespace pstrain::criteo
