// ImageTransform: an encoded image (JPEG or PNG) to one example of the
// model's input, [C, H, W] floats, as the encoded sources do it
// (docs/DATA.md): the training transform (random resized crop and flip, or a
// plain resize) or the evaluation one (resize and centre crop, or resize).
//
// data.augmentation and data.normalization default to "auto": chosen from
// what the stored images hold (SampleStoredImages), so Fashion-MNIST's grey
// 28 x 28 images are resized and scaled to [0, 1] while ImageNet's colour
// photographs get the ResNet crop and ImageNet's statistics. The choice and
// its reason travel in ImageTransform::description for the run's header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
  // What was chosen and why, one line ("normalization none (auto: grey
  // images ...), augmentation resize (auto: ...)").
  std::string description;
};

// What a split's stored images look like, from the headers of a sample.
struct StoredImages {
  int channels = 3;      // 3 when any sampled image is colour, else 1
  int shorter_side = 0;  // the median of the sampled images' shorter sides
  int sampled = 0;       // images whose headers were read (bad ones passed over)
};

// Reads the headers of up to 16 of `count` (> 0) images spread evenly over
// them; read(i) returns image i's encoded bytes, name(i) names it in errors
// (a file, a record). An image that cannot be read is passed over (the
// decoder refuses or skips it when a batch needs it); when none of the
// sample can be: the first one's error, "<name>: <what is wrong>".
absl::StatusOr<StoredImages> SampleStoredImages(int64_t count,
                                                const std::function<absl::StatusOr<std::string>(int64_t)>& read,
                                                const std::function<std::string(int64_t)>& name);

// The fields every encoded source reads: decode_threads, prefetch_batches,
// augmentation, normalization (its preset, or mean and std: both, of one
// or three values, std > 0).
absl::Status CheckDecodeFields(const DataConfig& data, const ConfigChecker& ck);

// data.augmentation and data.normalization for `example_shape`, "auto"
// resolved from `stored`. INVALID_ARGUMENT naming the field when the
// setting does not fit the model's input: "imagenet" for an input that is
// not 3 channels, or mean/std of a length other than 1 or its channels.
absl::StatusOr<ImageTransform> ChooseTransform(const DataConfig& data, const Shape& example_shape,
                                               const StoredImages& stored);

// Decodes `encoded` into `out` (NumElements(example_shape) floats); `seed`
// draws the training crop and flip. Errors: the decoder's INVALID_ARGUMENT.
absl::Status ApplyTransform(const ImageTransform& t, absl::string_view encoded, uint64_t seed, bool train, float* out);

}  // namespace pstrain
