// Decoding part of a JPEG: only the rows of a region (the rows above it are
// skipped without their inverse DCT, those below never read) and only the
// columns of the region rounded out to the iMCU (libjpeg-turbo's
// jpeg_skip_scanlines and jpeg_crop_scanline), at a scale of 1/denom. This
// is what makes a random crop cheaper than decoding the whole image (as
// TensorFlow's decode_and_crop_jpeg). Internal to augment.cc.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/image/image.h"

namespace pstrain::image::internal {

// A rectangle of pixels, [x, x + width) x [y, y + height).
struct PixelRect {
  int x = 0, y = 0, width = 0, height = 0;
};

struct JpegRegion {
  Image image;           // the decoded region: image.width may exceed the
                         // asked width (iMCU alignment)
  PixelRect at;          // where image lies in the scaled picture
  int scaled_width = 0;  // the whole picture at this scale
  int scaled_height = 0;
};

// `region` is in the scaled picture's pixels and is clipped to it; denom 1,
// 2, 4 or 8; channels 1 (grey) or 3 (RGB). INVALID_ARGUMENT "corrupt JPEG:
// <libjpeg's message>" for anything libjpeg refuses or warns about.
absl::StatusOr<JpegRegion> DecodeJpegRegion(absl::string_view bytes, int channels, int denom, PixelRect region);

}  // namespace pstrain::image::internal
