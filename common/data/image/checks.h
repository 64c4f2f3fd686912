// Checks shared by the JPEG and PNG halves of codec.h (defined in codec.cc).
// Internal.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/data/image/image.h"

namespace pstrain::image::internal {

// OK when 0 < width, height <= kMaxImageSide and width * height <=
// kMaxImagePixels; else INVALID_ARGUMENT naming `format` and the size.
absl::Status CheckDimensions(int64_t width, int64_t height, absl::string_view format);

// OK for an image that can be encoded: dimensions as above, channels 1 or 3
// and exactly width * height * channels pixel bytes.
absl::Status CheckImage(const Image& image);

}  // namespace pstrain::image::internal
