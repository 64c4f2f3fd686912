#include "common/data/image/jpeg_region.h"

#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain::image::internal {
namespace {

// libjpeg reports errors by calling error_exit, which must not return: it
// jumps back to Decode's setjmp with the message saved.
struct ErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void OnError(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (level -1: corrupt data libjpeg works around) are errors, as in
// the TurboJPEG path; trace messages are ignored.
void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) OnError(cinfo);
}

// The clipped region's rows and columns; false when nothing is left.
bool Clip(PixelRect* r, int width, int height) {
  const int x1 = std::min(r->x + r->width, width), y1 = std::min(r->y + r->height, height);
  r->x = std::max(r->x, 0);
  r->y = std::max(r->y, 0);
  r->width = x1 - r->x;
  r->height = y1 - r->y;
  return r->width > 0 && r->height > 0;
}

// The decoding itself, between setjmp and the end: only plain C state and
// `out` (whose pixels are sized before any libjpeg call that may jump).
// Returns false with e->message set on a libjpeg error.
bool Decode(jpeg_decompress_struct* cinfo, ErrorManager* e, absl::string_view bytes, int channels, int denom,
            PixelRect* region, JpegRegion* out) {
  if (setjmp(e->jump)) return false;
  jpeg_mem_src(cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(cinfo, TRUE);
  cinfo->out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  cinfo->scale_num = 1;
  cinfo->scale_denom = static_cast<unsigned int>(denom);
  jpeg_start_decompress(cinfo);
  out->scaled_width = static_cast<int>(cinfo->output_width);
  out->scaled_height = static_cast<int>(cinfo->output_height);
  if (!Clip(region, out->scaled_width, out->scaled_height)) {
    std::snprintf(e->message, sizeof(e->message), "crop region outside the %dx%d image", out->scaled_width,
                  out->scaled_height);
    return false;
  }
  JDIMENSION x = static_cast<JDIMENSION>(region->x), width = static_cast<JDIMENSION>(region->width);
  jpeg_crop_scanline(cinfo, &x, &width);
  if (region->y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(region->y));
  out->at = PixelRect{static_cast<int>(x), region->y, static_cast<int>(cinfo->output_width), region->height};
  out->image.width = out->at.width;
  out->image.height = out->at.height;
  out->image.channels = channels;
  out->image.pixels.resize(static_cast<size_t>(out->image.width) * out->image.height * channels);
  const size_t stride = static_cast<size_t>(out->image.width) * channels;
  while (cinfo->output_scanline < static_cast<JDIMENSION>(region->y + region->height)) {
    JSAMPROW row = out->image.pixels.data() + (cinfo->output_scanline - region->y) * stride;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  return true;
}

}  // namespace

absl::StatusOr<JpegRegion> DecodeJpegRegion(absl::string_view bytes, int channels, int denom, PixelRect region) {
  jpeg_decompress_struct cinfo;
  ErrorManager e;
  cinfo.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = OnError;
  e.pub.emit_message = OnMessage;
  e.message[0] = '\0';
  jpeg_create_decompress(&cinfo);
  JpegRegion out;
  const bool ok = Decode(&cinfo, &e, bytes, channels, denom, &region, &out);
  jpeg_destroy_decompress(&cinfo);  // also ends a decompression cut short
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("corrupt JPEG: ", e.message));
  return out;
}

}  // namespace pstrain::image::internal
