// Synthetic data for throughput measurement.
//
// The inputs are uniform noise and the labels are drawn independently of them,
// so nothing can be learned: use this to measure images/sec without reading
// files (like tf_cnn_benchmarks without --data_dir), never to judge accuracy.
#pragma once

#include <cstdint>

#include "common/data/dataset.h"

namespace pstrain {

// `n` examples of `example_shape` ([C,H,W]) with pixels uniform in [0, 1) and
// labels uniform in [0, num_classes). The result depends only on the arguments
// (same seed, same data, on every machine and standard library).
// CHECK-fails on n < 0, a non-positive dimension or num_classes <= 0.
Dataset MakeSyntheticDataset(int64_t n, Shape example_shape, int num_classes, uint64_t seed);

}  // namespace pstrain
