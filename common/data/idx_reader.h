// Reader for Fashion-MNIST (and MNIST) in the IDX format of LeCun et al.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"

namespace pstrain {

// Loads split "train" (60000 examples) or "test" (10000) from `dir`, which holds
//   {train,t10k}-images-idx3-ubyte.gz and {train,t10k}-labels-idx1-ubyte.gz
// (the Debian package dataset-fashion-mnist puts them in
// /usr/share/datasets/fashion-mnist). A file without the .gz suffix is used
// when the .gz one is absent; uncompressed content is read as is.
//
// The result has example_shape [1,28,28], 10 classes, pixels scaled from bytes
// to [0,1] (x / 255). Checks: magic numbers (2051 images, 2049 labels), 28x28
// images, equal counts in both files, every label in [0,10), no truncated or
// trailing data, gzip integrity (CRC). Errors name the file and the fault:
// NOT_FOUND for a missing file, DATA_LOSS for a corrupt or inconsistent one,
// INVALID_ARGUMENT for an unknown split.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, std::string_view split);

}  // namespace pstrain
