// Fuzz target: image decoding and augmentation (common/data/image/codec.h,
// augment.h) on arbitrary bytes.
//
// Feeds: input byte 0 picks the channels (bit 0: grey or RGB), train or eval
// (bit 1) and the output side (8 << (bits 2-3)); byte 1 the minimum size of
// the scaled decode (in 16ths of the header's size); the rest is the
// encoded image, given to ReadImageInfo, DecodeImage at full size and with
// that minimum, and DecodeAugment. Images whose header claims more than
// 2^22 pixels stop after ReadImageInfo (the limits allow 2^28, which would
// only measure the allocator here).
// Asserts: errors are INVALID_ARGUMENT with a message; an image whose header
// does not read does not decode; a decoded image has the header's size (at
// full size) or one between the minimum and the full size (scaled), and
// exactly width x height x channels bytes; DecodeAugment's output is finite.
// Seeds: tests/fuzz/corpus/image_decode/ (a tiny JPEG and a tiny PNG, with
// the option bytes in front).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/data/image/augment.h"
#include "common/data/image/codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace pstrain::image;

constexpr int64_t kMaxFuzzPixels = int64_t{1} << 22;

void CheckError(const absl::Status& status, const char* what) {
  FUZZ_CHECK(absl::IsInvalidArgument(status) && !status.message().empty(), what, ": ", status.ToString());
}

void CheckDecoded(const Image& img, int channels, int min_w, int min_h, const ImageInfo& info) {
  FUZZ_CHECK(img.channels == channels, "decoded ", img.channels, " channels, asked ", channels);
  FUZZ_CHECK(img.pixels.size() == static_cast<size_t>(img.width) * img.height * channels, "decoded ", img.pixels.size(),
             " bytes for ", img.width, "x", img.height, "x", channels);
  FUZZ_CHECK(img.width <= info.width && img.height <= info.height, "decoded ", img.width, "x", img.height,
             " is larger than the header's ", info.width, "x", info.height);
  const bool full = img.width == info.width && img.height == info.height;
  FUZZ_CHECK(full || (img.width >= min_w && img.height >= min_h), "scaled decode ", img.width, "x", img.height,
             " is below the minimum ", min_w, "x", min_h);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int channels = (data[0] & 1) ? 1 : 3;
  AugmentOptions options;
  options.channels = channels;
  options.train = (data[0] & 2) != 0;
  options.out_height = options.out_width = 8 << ((data[0] >> 2) & 3);
  const int sixteenths = data[1] % 17;
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);

  absl::StatusOr<ImageInfo> info = ReadImageInfo(bytes);
  if (!info.ok()) {
    CheckError(info.status(), "ReadImageInfo");
    const absl::Status decoded = DecodeImage(bytes, channels).status();
    FUZZ_CHECK(!decoded.ok(), "decoded an image whose header does not read: ", info.status().ToString());
    CheckError(decoded, "DecodeImage");
    return 0;
  }
  FUZZ_CHECK(info->width > 0 && info->height > 0 && info->format != ImageFormat::kUnknown, "header of ", info->width,
             "x", info->height);
  if (int64_t{info->width} * info->height > kMaxFuzzPixels) return 0;

  absl::StatusOr<Image> full = DecodeImage(bytes, channels);
  if (full.ok()) CheckDecoded(*full, channels, info->width, info->height, *info);
  if (!full.ok()) CheckError(full.status(), "DecodeImage");
  const int min_w = info->width * sixteenths / 16, min_h = info->height * sixteenths / 16;
  absl::StatusOr<Image> scaled = DecodeImage(bytes, channels, min_w, min_h);
  if (scaled.ok()) CheckDecoded(*scaled, channels, min_w, min_h, *info);
  if (!scaled.ok()) CheckError(scaled.status(), "DecodeImage (scaled)");

  std::vector<float> out(static_cast<size_t>(channels) * options.out_height * options.out_width);
  const absl::Status augmented = DecodeAugment(bytes, options, data[1], out.data());
  if (!augmented.ok()) {
    CheckError(augmented, "DecodeAugment");
    return 0;
  }
  for (float v : out) FUZZ_CHECK(std::isfinite(v), "DecodeAugment wrote ", v);
  return 0;
}
