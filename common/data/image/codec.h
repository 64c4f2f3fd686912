// JPEG and PNG decoding and encoding (libjpeg-turbo's TurboJPEG, libspng).
//
// Every function here is safe on hostile bytes: a bad input is an
// INVALID_ARGUMENT whose message says what was wrong, never a crash, and
// nothing is allocated before the header's dimensions passed the limits
// below. Decoders keep one codec handle per thread (thread_local), so
// concurrent calls from many threads are safe and cost no locking.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/image/image.h"

namespace pstrain::image {

enum class ImageFormat { kJpeg, kPng, kUnknown };

// Images larger than this on either side, or with more pixels in all, are
// refused before anything is decoded.
inline constexpr int kMaxImageSide = 32768;
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// By magic bytes: FF D8 FF is JPEG, 89 'PNG' 0D 0A 1A 0A is PNG.
ImageFormat DetectFormat(absl::string_view bytes);

struct ImageInfo {
  int width = 0;
  int height = 0;
  // What the file stores: 1 (grey; a JPEG's grey colour space, a PNG's grey
  // or grey + alpha) or 3 (colour; alpha and palettes count as colour).
  int channels = 3;
  ImageFormat format = ImageFormat::kUnknown;
};

// The dimensions and channels from the header alone (nothing decoded). INVALID_ARGUMENT
// for an unknown format, a corrupt header or dimensions over the limits.
absl::StatusOr<ImageInfo> ReadImageInfo(absl::string_view bytes);

// Decodes to `channels` (1: grey, colour converted to luma; 3: RGB, grey
// replicated). For a JPEG with min_width or min_height > 0 it decodes at the
// smallest of libjpeg-turbo's scaling factors 1/8, 1/4 and 1/2 whose output
// is still at least min_width x min_height (or at full size when none is),
// which is much faster for a crop that ends up small (the n/8 factors in
// between are left out: without SIMD they decode slower than the full size);
// PNGs are always full size.
// The result's width and height are the decoded (maybe scaled) ones.
// INVALID_ARGUMENT: channels not 1 or 3, "not a JPEG or PNG image (starts
// with 0x..)", "corrupt JPEG: <reason>" (warnings such as a truncated file
// included), "corrupt PNG: <reason>", or dimensions over the limits.
absl::StatusOr<Image> DecodeImage(absl::string_view bytes, int channels, int min_width = 0, int min_height = 0);

// Baseline JPEG at quality 1..100 (4:2:0 for RGB, greyscale for grey).
// INVALID_ARGUMENT for a bad image (dimensions, channels, pixel count) or
// quality.
absl::StatusOr<std::string> EncodeJpeg(const Image& image, int quality);

// Lossless 8-bit PNG (greyscale or truecolour). INVALID_ARGUMENT for a bad
// image.
absl::StatusOr<std::string> EncodePng(const Image& image);

}  // namespace pstrain::image
