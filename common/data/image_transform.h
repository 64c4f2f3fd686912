// ImageTransform: an encoded image (JPEG or PNG) to one example of the
// model's input, [C, H, W] floats, as the encoded sources do it
// (docs/DATA.md): the training transform (random resized crop and flip, or a
// plain resize) or the evaluation one (resize and centre crop, or resize).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/config/config_checks.h"
#include "common/data/image/augment.h"
#include "common/tensor.h"
#include "proto/config.pb.h"

namespace pstrain {

struct ImageTransform {
  Shape example_shape;      // [C, H, W]
  bool random_crop = true;  // data.augmentation crop; else resize
  image::Normalization normalization = image::kImageNetNormalization;
};

// The fields every encoded source reads: decode_threads, prefetch_batches,
// augmentation, normalization.
absl::Status CheckDecodeFields(const DataConfig& data, const ConfigChecker& ck);

// data.augmentation and data.normalization for `example_shape`.
ImageTransform TransformFromConfig(const DataConfig& data, const Shape& example_shape);

// Decodes `encoded` into `out` (NumElements(example_shape) floats); `seed`
// draws the training crop and flip. Errors: the decoder's INVALID_ARGUMENT.
absl::Status ApplyTransform(const ImageTransform& t, absl::string_view encoded, uint64_t seed, bool train, float* out);

}  // namespace pstrain
