#include "common/data/image/png_codec.h"

#include <spng.h>

#include <cstdlib>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/data/image/checks.h"

namespace pstrain::image::internal {
namespace {

// Ancillary chunks kept in memory (text, ICC profiles, ...) are capped so a
// hostile file cannot make the decoder buffer much.
constexpr size_t kChunkSizeLimit = size_t{16} << 20;
constexpr size_t kChunkCacheLimit = size_t{64} << 20;

struct CtxDeleter {
  void operator()(spng_ctx* ctx) const { spng_ctx_free(ctx); }
};
using Ctx = std::unique_ptr<spng_ctx, CtxDeleter>;

absl::Status SpngError(int error, absl::string_view what = "corrupt PNG") {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", spng_strerror(error)));
}

// A decoder over `bytes` with the limits set, its header read and checked.
absl::StatusOr<Ctx> OpenDecoder(absl::string_view bytes, spng_ihdr* ihdr) {
  Ctx ctx(spng_ctx_new(0));
  if (ctx == nullptr) return absl::InternalError("cannot create a PNG decoder");
  spng_set_image_limits(ctx.get(), kMaxImageSide, kMaxImageSide);
  spng_set_chunk_limits(ctx.get(), kChunkSizeLimit, kChunkCacheLimit);
  if (int e = spng_set_png_buffer(ctx.get(), bytes.data(), bytes.size()); e != 0) return SpngError(e);
  if (int e = spng_get_ihdr(ctx.get(), ihdr); e != 0) return SpngError(e);
  if (absl::Status s = CheckDimensions(ihdr->width, ihdr->height, "PNG"); !s.ok()) return s;
  return ctx;
}

// BT.601 luma, as libjpeg converts RGB to grey.
void RgbToGrey(const std::vector<uint8_t>& rgb, std::vector<uint8_t>* grey) {
  grey->resize(rgb.size() / 3);
  for (size_t i = 0; i < grey->size(); ++i) {
    const uint32_t y = 19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2];
    (*grey)[i] = static_cast<uint8_t>((y + 32768u) >> 16);
  }
}

}  // namespace

absl::StatusOr<ImageInfo> ReadPngInfo(absl::string_view bytes) {
  spng_ihdr ihdr{};
  absl::StatusOr<Ctx> ctx = OpenDecoder(bytes, &ihdr);
  if (!ctx.ok()) return ctx.status();
  const bool grey = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE || ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
  return ImageInfo{static_cast<int>(ihdr.width), static_cast<int>(ihdr.height), grey ? 1 : 3, ImageFormat::kPng};
}

absl::StatusOr<Image> DecodePng(absl::string_view bytes, int channels) {
  spng_ihdr ihdr{};
  absl::StatusOr<Ctx> ctx = OpenDecoder(bytes, &ihdr);
  if (!ctx.ok()) return ctx.status();
  // Grey sources of up to 8 bits decode straight to grey; everything else
  // goes through RGB (grey replicated, palettes expanded, 16 bits reduced).
  const bool grey_source = ihdr.color_type == SPNG_COLOR_TYPE_GRAYSCALE && ihdr.bit_depth <= 8;
  const bool direct_grey = channels == 1 && grey_source;
  const int fmt = direct_grey ? SPNG_FMT_G8 : SPNG_FMT_RGB8;
  size_t size = 0;
  if (int e = spng_decoded_image_size(ctx->get(), fmt, &size); e != 0) return SpngError(e);
  Image image;
  image.width = static_cast<int>(ihdr.width);
  image.height = static_cast<int>(ihdr.height);
  image.channels = channels;
  const size_t want = static_cast<size_t>(image.width) * image.height * (direct_grey ? 1 : 3);
  if (size != want) return absl::InternalError(absl::StrCat("PNG decoder wants ", size, " bytes, expected ", want));
  std::vector<uint8_t> decoded(size);
  if (int e = spng_decode_image(ctx->get(), decoded.data(), decoded.size(), fmt, 0); e != 0) return SpngError(e);
  if (channels == 1 && !direct_grey) {
    RgbToGrey(decoded, &image.pixels);
  } else {
    image.pixels = std::move(decoded);
  }
  return image;
}

absl::StatusOr<std::string> EncodePngImage(const Image& image) {
  Ctx ctx(spng_ctx_new(SPNG_CTX_ENCODER));
  if (ctx == nullptr) return absl::InternalError("cannot create a PNG encoder");
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<uint32_t>(image.width);
  ihdr.height = static_cast<uint32_t>(image.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = image.channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE : SPNG_COLOR_TYPE_TRUECOLOR;
  if (int e = spng_set_ihdr(ctx.get(), &ihdr); e != 0) return SpngError(e, "PNG encoding failed");
  if (int e =
          spng_encode_image(ctx.get(), image.pixels.data(), image.pixels.size(), SPNG_FMT_PNG, SPNG_ENCODE_FINALIZE);
      e != 0) {
    return SpngError(e, "PNG encoding failed");
  }
  size_t size = 0;
  int error = 0;
  void* buffer = spng_get_png_buffer(ctx.get(), &size, &error);
  if (buffer == nullptr) return SpngError(error, "PNG encoding failed");
  std::string out(static_cast<const char*>(buffer), size);
  std::free(buffer);
  return out;
}

}  // namespace pstrain::image::internal
