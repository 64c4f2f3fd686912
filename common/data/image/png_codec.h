// The PNG half of codec.h, on libspng. Internal: callers use codec.h, which
// checks the format and the channels first.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/image/codec.h"
#include "common/data/image/image.h"

namespace pstrain::image::internal {

// Width and height from the IHDR chunk (spng_get_ihdr).
absl::StatusOr<ImageInfo> ReadPngInfo(absl::string_view bytes);

// Full size; channels 1 or 3 (16-bit samples reduced to 8, alpha dropped).
absl::StatusOr<Image> DecodePng(absl::string_view bytes, int channels);

// A valid image (CheckImage).
absl::StatusOr<std::string> EncodePngImage(const Image& image);

}  // namespace pstrain::image::internal
