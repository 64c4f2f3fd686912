// ResNet-style augmentation of one image into a float batch slot.
//
// Training (torchvision's RandomResizedCrop + RandomHorizontalFlip): a crop
// of a random area fraction and a log-uniform aspect ratio of the source,
// resized to the output size, mirrored with probability 1/2. Evaluation: the
// shorter side resized to out/eval_crop_fraction (256 for 224), then the
// centre out_height x out_width crop. Either way bilinear sampling does the
// crop, resize, flip and normalisation in one pass and writes float32 CHW.
//
// All randomness comes from the caller's seed (a SplitMix64 stream), so an
// image's crop and flip are the same whichever thread computes them.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/data/image/image.h"

namespace pstrain::image {

// out = (pixel / 255 - mean[c]) / stddev[c], per channel (grey uses [0]).
struct Normalization {
  float mean[3];
  float stddev[3];
};
inline constexpr Normalization kImageNetNormalization = {{0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}};
inline constexpr Normalization kNoNormalization = {{0, 0, 0}, {1, 1, 1}};  // pixel / 255

struct AugmentOptions {
  int out_height = 224;  // > 0
  int out_width = 224;   // > 0
  int channels = 3;      // 1 (grey) or 3 (RGB)
  bool train = true;     // random-resized crop + flip; false: resize + centre crop
  Normalization norm = kImageNetNormalization;
  // Training crop: area fraction of the source in [min_area, max_area] and
  // aspect ratio (width / height) log-uniform in [min_ratio, max_ratio].
  float min_area = 0.08f;
  float max_area = 1.0f;
  float min_ratio = 3.0f / 4;
  float max_ratio = 4.0f / 3;
  bool flip = true;  // training: mirror with probability 1/2
  // Evaluation: the centre crop covers this fraction of the resized shorter side.
  float eval_crop_fraction = 0.875f;
};

// INVALID_ARGUMENT naming the bad field (sizes, channels, ranges).
absl::Status ValidateAugmentOptions(const AugmentOptions& o);

// A region of the source in pixel units (edges, not centres: the whole image
// is {0, 0, width, height}). Fractional for evaluation crops.
struct CropBox {
  float x = 0;
  float y = 0;
  float width = 0;
  float height = 0;
};

// The crop (and, training only, *flip) for a width x height source, drawn
// from `seed` alone; always inside the image with positive size.
// Training: 10 attempts at area and ratio as above whose crop fits, at an
// integer position uniform over the image; else the centre crop of the
// whole image clamped to [min_ratio, max_ratio]. Evaluation: centred, *flip
// false. `o` must be valid (ValidateAugmentOptions).
CropBox ChooseCrop(int width, int height, const AugmentOptions& o, uint64_t seed, bool* flip);

// Samples `box` of `img` bilinearly (pixel centres aligned, edges clamped)
// onto out_height x out_width, mirrored left-right when `flip`, normalised,
// into out[c * out_height * out_width + y * out_width + x] for c <
// o.channels. img.channels must equal o.channels, or be 1 (replicated).
void AugmentInto(const Image& img, const CropBox& box, bool flip, const AugmentOptions& o, float* out);

// The pipeline's call: ReadImageInfo, ChooseCrop on the full size, decode
// (a JPEG: only the crop's rows and iMCU-aligned columns, at the smallest of
// the scales 1/8, 1/4, 1/2 that keeps at least the output's pixels across
// the crop, jpeg_region.h; a PNG whole; grey and colour converted to
// o.channels by the decoder), the box moved into the decoded pixels,
// AugmentInto. `out` holds o.channels *
// o.out_height * o.out_width floats; it is unspecified after an error
// (INVALID_ARGUMENT as DecodeImage's or for bad options).
absl::Status DecodeAugment(absl::string_view encoded, const AugmentOptions& o, uint64_t seed, float* out);

}  // namespace pstrain::image
