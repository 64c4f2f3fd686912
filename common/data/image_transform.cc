#include "common/data/image_transform.h"

#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/status_macros.h"

namespace pstrain {

absl::Status CheckDecodeFields(const DataConfig& d, const ConfigChecker& ck) {
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("data.decode_threads", d.decode_threads()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.prefetch_batches", d.prefetch_batches()));
  if (d.augmentation() != "crop" && d.augmentation() != "resize") {
    return ck.Fail("data.augmentation", "crop or resize", absl::StrCat("'", d.augmentation(), "'"));
  }
  if (d.normalization() != "imagenet" && d.normalization() != "none") {
    return ck.Fail("data.normalization", "imagenet or none", absl::StrCat("'", d.normalization(), "'"));
  }
  return absl::OkStatus();
}

ImageTransform TransformFromConfig(const DataConfig& data, const Shape& example_shape) {
  ImageTransform t;
  t.example_shape = example_shape;
  t.random_crop = data.augmentation() == "crop";
  t.normalization = data.normalization() == "imagenet" ? image::kImageNetNormalization : image::kNoNormalization;
  return t;
}

absl::Status ApplyTransform(const ImageTransform& t, absl::string_view encoded, uint64_t seed, bool train, float* out) {
  image::AugmentOptions o;
  o.channels = static_cast<int>(t.example_shape[0]);
  o.out_height = static_cast<int>(t.example_shape[1]);
  o.out_width = static_cast<int>(t.example_shape[2]);
  o.norm = t.normalization;
  o.train = train;
  if (t.random_crop) return image::DecodeAugment(encoded, o, seed, out);
  // resize: the whole image, nothing random.
  absl::StatusOr<image::Image> decoded = image::DecodeImage(encoded, o.channels, o.out_width, o.out_height);
  if (!decoded.ok()) return decoded.status();
  const image::CropBox whole{0, 0, static_cast<float>(decoded->width), static_cast<float>(decoded->height)};
  image::AugmentInto(*decoded, whole, /*flip=*/false, o, out);
  return absl::OkStatus();
}

}  // namespace pstrain
