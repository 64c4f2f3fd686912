// The JPEG half of codec.h, on TurboJPEG (libjpeg-turbo 2.1). Internal:
// callers use codec.h, which checks the format and the channels first.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/data/image/codec.h"
#include "common/data/image/image.h"

namespace pstrain::image::internal {

// Width and height from the JPEG header (tjDecompressHeader3).
absl::StatusOr<ImageInfo> ReadJpegInfo(absl::string_view bytes);

// channels 1 or 3; min sizes as DecodeImage's.
absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes, int channels, int min_width, int min_height);

// A valid image (CheckImage) and quality 1..100.
absl::StatusOr<std::string> EncodeJpegImage(const Image& image, int quality);

}  // namespace pstrain::image::internal
