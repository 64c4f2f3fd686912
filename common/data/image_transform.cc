#include "common/data/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/data/image/codec.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

constexpr int64_t kSampleImages = 16;
// Below this shorter side, "auto" resizes instead of the random-resized crop
// (8-100% of a 28 x 28 image is a few pixels blown up: 7 points of
// Fashion-MNIST accuracy lost).
constexpr int kMinCropSide = 64;

absl::Status CheckStatistics(const NormalizationConfig& n, const ConfigChecker& ck) {
  if (n.mean_size() != n.std_size()) {
    return ck.Fail("data.normalization", "mean and std of the same length",
                   absl::StrCat(n.mean_size(), " means and ", n.std_size(), " stds"));
  }
  if (n.mean_size() != 0 && n.mean_size() != 1 && n.mean_size() != 3) {
    return ck.Fail("data.normalization.mean", "1 or 3 values (one per channel)", absl::StrCat(n.mean_size()));
  }
  if (n.mean_size() > 0 && n.preset() != NormalizationConfig::auto_) {
    return ck.Fail("data.normalization.preset", "auto (unset) beside mean and std",
                   absl::StrCat("'", NormalizationConfig::Preset_Name(n.preset()), "'"));
  }
  for (int c = 0; c < n.std_size(); ++c) {
    PSTRAIN_RETURN_IF_ERROR(ck.Positive(absl::StrCat("data.normalization.std[", c, "]"), n.std(c)));
  }
  return absl::OkStatus();
}

// The config's own statistics, one value per channel (a single value for all).
absl::StatusOr<image::Normalization> OwnStatistics(const NormalizationConfig& n, int channels) {
  if (n.mean_size() != 1 && n.mean_size() != channels) {
    return absl::InvalidArgumentError(absl::StrCat("data.normalization: ", n.mean_size(),
                                                   " mean/std values for a model input of ", channels,
                                                   " channels (give 1, or one per channel)"));
  }
  image::Normalization norm = image::kNoNormalization;
  for (int c = 0; c < 3; ++c) {
    const int i = n.mean_size() == 1 ? 0 : std::min(c, n.mean_size() - 1);
    norm.mean[c] = n.mean(i);
    norm.stddev[c] = n.std(i);
  }
  return norm;
}

// data.normalization for a model input of `channels`; *why says what and why.
absl::StatusOr<image::Normalization> ChooseNormalization(const NormalizationConfig& n, int channels,
                                                         const StoredImages& stored, std::string* why) {
  if (n.mean_size() > 0) {
    *why = absl::StrCat("normalization mean [", absl::StrJoin(n.mean(), ", "), "] std [", absl::StrJoin(n.std(), ", "),
                        "] (the config's)");
    return OwnStatistics(n, channels);
  }
  if (n.preset() == NormalizationConfig::imagenet) {
    if (channels != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data.normalization imagenet: ImageNet's statistics are per RGB channel, but the model's input has ",
          channels, " channel(s); use auto, none or {mean: [...], std: [...]}"));
    }
    *why = "normalization imagenet (the config's)";
    return image::kImageNetNormalization;
  }
  if (n.preset() == NormalizationConfig::none) {
    *why = "normalization none: pixel / 255 (the config's)";
    return image::kNoNormalization;
  }
  if (channels == 3 && stored.channels == 3) {
    *why = "normalization imagenet (auto: colour images into a 3-channel input)";
    return image::kImageNetNormalization;
  }
  *why = channels != 3 ? absl::StrCat("normalization none: pixel / 255 (auto: a ", channels,
                                      "-channel input; ImageNet's statistics are per RGB channel)")
                       : "normalization none: pixel / 255 (auto: grey images; ImageNet's statistics are for colour)";
  return image::kNoNormalization;
}

// data.augmentation: true for the random-resized crop.
bool ChooseCrop(DataConfig::Augmentation augmentation, const StoredImages& stored, std::string* why) {
  if (augmentation != DataConfig::auto_) {
    *why = absl::StrCat("augmentation ", DataConfig::Augmentation_Name(augmentation), " (the config's)");
    return augmentation == DataConfig::crop;
  }
  if (stored.shorter_side >= kMinCropSide) {
    *why = absl::StrCat("augmentation crop (auto: images of ", stored.shorter_side,
                        " px on the shorter side, enough for the random-resized crop)");
    return true;
  }
  *why = absl::StrCat("augmentation resize (auto: ", stored.shorter_side, " px images are under the ", kMinCropSide,
                      " px the random-resized crop needs)");
  return false;
}

}  // namespace

absl::StatusOr<StoredImages> SampleStoredImages(int64_t count,
                                                const std::function<absl::StatusOr<std::string>(int64_t)>& read,
                                                const std::function<std::string(int64_t)>& name) {
  if (count <= 0) return absl::InvalidArgumentError("no images to sample");
  StoredImages stored;
  stored.channels = 1;
  std::vector<int> sides;
  absl::Status first_error;
  const int64_t n = std::min(count, kSampleImages);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = k * count / n;
    absl::StatusOr<std::string> bytes = read(i);
    absl::StatusOr<image::ImageInfo> info =
        bytes.ok() ? image::ReadImageInfo(*bytes) : absl::StatusOr<image::ImageInfo>(bytes.status());
    if (!info.ok()) {  // the decoder names (or skips) it when a batch needs it
      if (first_error.ok())
        first_error = absl::Status(info.status().code(), absl::StrCat(name(i), ": ", info.status().message()));
      continue;
    }
    stored.channels = std::max(stored.channels, info->channels);
    sides.push_back(std::min(info->width, info->height));
  }
  if (sides.empty()) return first_error;
  std::nth_element(sides.begin(), sides.begin() + sides.size() / 2, sides.end());
  stored.shorter_side = sides[sides.size() / 2];
  stored.sampled = static_cast<int>(sides.size());
  return stored;
}

absl::Status CheckDecodeFields(const DataConfig& d, const ConfigChecker& ck) {
  PSTRAIN_RETURN_IF_ERROR(ck.NonNegative("data.decode_threads", d.decode_threads()));
  PSTRAIN_RETURN_IF_ERROR(ck.Positive("data.prefetch_batches", d.prefetch_batches()));
  return CheckStatistics(d.normalization(), ck);
}

absl::StatusOr<ImageTransform> ChooseTransform(const DataConfig& data, const Shape& example_shape,
                                               const StoredImages& stored) {
  ImageTransform t;
  t.example_shape = example_shape;
  const int channels = static_cast<int>(example_shape[0]);
  std::string norm_why, crop_why;
  PSTRAIN_ASSIGN_OR_RETURN(t.normalization, ChooseNormalization(data.normalization(), channels, stored, &norm_why));
  t.random_crop = ChooseCrop(data.augmentation(), stored, &crop_why);
  t.description = absl::StrCat(stored.channels == 1 ? "grey" : "colour", " images -> ",
                               absl::StrJoin(example_shape, "x"), ": ", norm_why, ", ", crop_why);
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
