#include "common/data/image/codec.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/data/image/checks.h"
#include "common/data/image/jpeg_codec.h"
#include "common/data/image/png_codec.h"

namespace pstrain::image {
namespace {

constexpr unsigned char kJpegMagic[] = {0xFF, 0xD8, 0xFF};
constexpr unsigned char kPngMagic[] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};

template <size_t N>
bool StartsWith(absl::string_view bytes, const unsigned char (&magic)[N]) {
  return bytes.size() >= N && std::memcmp(bytes.data(), magic, N) == 0;
}

// "not a JPEG or PNG image (starts with 0x0102..)", at most 8 bytes shown.
absl::Status UnknownFormat(absl::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("not a JPEG or PNG image (empty)");
  std::string hex = "0x";
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i) {
    absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(bytes[i]));
  }
  return absl::InvalidArgumentError(absl::StrCat("not a JPEG or PNG image (starts with ", hex, ")"));
}

absl::Status CheckChannels(int channels) {
  if (channels == 1 || channels == 3) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("channels must be 1 (grey) or 3 (RGB), got ", channels));
}

}  // namespace

namespace internal {

absl::Status CheckDimensions(int64_t width, int64_t height, absl::string_view format) {
  if (width <= 0 || height <= 0 || width > kMaxImageSide || height > kMaxImageSide ||
      width * height > kMaxImagePixels) {
    return absl::InvalidArgumentError(absl::StrCat(format, " image of ", width, "x", height,
                                                   " pixels: sides must be 1..", kMaxImageSide, " and at most ",
                                                   kMaxImagePixels, " pixels in all"));
  }
  return absl::OkStatus();
}

absl::Status CheckImage(const Image& image) {
  if (absl::Status s = CheckDimensions(image.width, image.height, "an"); !s.ok()) return s;
  if (absl::Status s = CheckChannels(image.channels); !s.ok()) return s;
  const size_t want = static_cast<size_t>(image.width) * image.height * image.channels;
  if (image.pixels.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat("image of ", image.width, "x", image.height, "x", image.channels,
                                                   " has ", image.pixels.size(), " pixel bytes, expected ", want));
  }
  return absl::OkStatus();
}

}  // namespace internal

ImageFormat DetectFormat(absl::string_view bytes) {
  if (StartsWith(bytes, kJpegMagic)) return ImageFormat::kJpeg;
  if (StartsWith(bytes, kPngMagic)) return ImageFormat::kPng;
  return ImageFormat::kUnknown;
}

absl::StatusOr<ImageInfo> ReadImageInfo(absl::string_view bytes) {
  switch (DetectFormat(bytes)) {
    case ImageFormat::kJpeg:
      return internal::ReadJpegInfo(bytes);
    case ImageFormat::kPng:
      return internal::ReadPngInfo(bytes);
    case ImageFormat::kUnknown:
      break;
  }
  return UnknownFormat(bytes);
}

absl::StatusOr<Image> DecodeImage(absl::string_view bytes, int channels, int min_width, int min_height) {
  if (absl::Status s = CheckChannels(channels); !s.ok()) return s;
  switch (DetectFormat(bytes)) {
    case ImageFormat::kJpeg:
      return internal::DecodeJpeg(bytes, channels, min_width, min_height);
    case ImageFormat::kPng:
      return internal::DecodePng(bytes, channels);
    case ImageFormat::kUnknown:
      break;
  }
  return UnknownFormat(bytes);
}

absl::StatusOr<std::string> EncodeJpeg(const Image& image, int quality) {
  if (absl::Status s = internal::CheckImage(image); !s.ok()) return s;
  if (quality < 1 || quality > 100) {
    return absl::InvalidArgumentError(absl::StrCat("JPEG quality must be 1..100, got ", quality));
  }
  return internal::EncodeJpegImage(image, quality);
}

absl::StatusOr<std::string> EncodePng(const Image& image) {
  if (absl::Status s = internal::CheckImage(image); !s.ok()) return s;
  return internal::EncodePngImage(image);
}

}  // namespace pstrain::image
