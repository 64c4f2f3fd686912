#include "common/data/image/jpeg_codec.h"

#include <turbojpeg.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/data/image/checks.h"

namespace pstrain::image::internal {
namespace {

// One TurboJPEG handle of a kind per thread, destroyed with the thread.
class ThreadHandle {
 public:
  explicit ThreadHandle(tjhandle handle) : handle_(handle) {}
  ~ThreadHandle() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  ThreadHandle(const ThreadHandle&) = delete;
  ThreadHandle& operator=(const ThreadHandle&) = delete;
  tjhandle get() const { return handle_; }

 private:
  tjhandle handle_;
};

tjhandle Decompressor() {
  thread_local ThreadHandle handle(tjInitDecompress());
  return handle.get();
}

tjhandle Compressor() {
  thread_local ThreadHandle handle(tjInitCompress());
  return handle.get();
}

absl::Status TurboJpegError(tjhandle handle, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", tjGetErrorStr2(handle)));
}

// TurboJPEG takes a non-const buffer and an unsigned long size.
unsigned char* Data(absl::string_view bytes) {
  return reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data()));
}

struct JpegHeader {
  int width = 0;
  int height = 0;
  int colorspace = 0;
};

absl::StatusOr<JpegHeader> ReadHeader(tjhandle handle, absl::string_view bytes) {
  if (handle == nullptr) return absl::InternalError("cannot create a TurboJPEG decompressor");
  JpegHeader h;
  int subsamp = 0;
  if (tjDecompressHeader3(handle, Data(bytes), bytes.size(), &h.width, &h.height, &subsamp, &h.colorspace) != 0) {
    return TurboJpegError(handle, "corrupt JPEG");
  }
  // A file cut before its frame header reads as tables only, of 0 x 0.
  if (h.width <= 0 || h.height <= 0) return absl::InvalidArgumentError("corrupt JPEG: no frame header (truncated?)");
  if (absl::Status s = CheckDimensions(h.width, h.height, "JPEG"); !s.ok()) return s;
  if (h.colorspace == TJCS_CMYK || h.colorspace == TJCS_YCCK) {
    return absl::InvalidArgumentError("unsupported JPEG: CMYK colour space");
  }
  return h;
}

// The smallest scaled size that is still >= min_width x min_height (the full
// size when no factor below 1 is), among the factors 1/2, 1/4 and 1/8 only:
// libjpeg-turbo 2.1 has SIMD inverse DCTs for those, while the n/8 between
// them (7/8, 3/4, ...) run its plain C ones and decode slower than the full
// size does (pstrain-bench input: 0.42 of a full decode's rate with them,
// 0.70 decoding at full size).
void ChooseScaledSize(const JpegHeader& h, int min_width, int min_height, int* width, int* height) {
  *width = h.width;
  *height = h.height;
  if (min_width <= 0 && min_height <= 0) return;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  for (int i = 0; factors != nullptr && i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    const int w = TJSCALED(h.width, f);
    const int hh = TJSCALED(h.height, f);
    if (w >= min_width && hh >= min_height && int64_t{w} * hh < int64_t{*width} * *height) {
      *width = w;
      *height = hh;
    }
  }
}

}  // namespace

absl::StatusOr<ImageInfo> ReadJpegInfo(absl::string_view bytes) {
  absl::StatusOr<JpegHeader> h = ReadHeader(Decompressor(), bytes);
  if (!h.ok()) return h.status();
  return ImageInfo{h->width, h->height, h->colorspace == TJCS_GRAY ? 1 : 3, ImageFormat::kJpeg};
}

absl::StatusOr<Image> DecodeJpeg(absl::string_view bytes, int channels, int min_width, int min_height) {
  tjhandle handle = Decompressor();
  absl::StatusOr<JpegHeader> h = ReadHeader(handle, bytes);
  if (!h.ok()) return h.status();
  Image image;
  image.channels = channels;
  ChooseScaledSize(*h, min_width, min_height, &image.width, &image.height);
  image.pixels.resize(static_cast<size_t>(image.width) * image.height * channels);
  const int format = channels == 1 ? TJPF_GRAY : TJPF_RGB;
  // Warnings (a truncated file, bad data in a scan) fail the decode too:
  // TurboJPEG returns -1 for them and the pixels are partly made up.
  if (tjDecompress2(handle, Data(bytes), bytes.size(), image.pixels.data(), image.width, 0, image.height, format, 0) !=
      0) {
    return TurboJpegError(handle, "corrupt JPEG");
  }
  return image;
}

absl::StatusOr<std::string> EncodeJpegImage(const Image& image, int quality) {
  tjhandle handle = Compressor();
  if (handle == nullptr) return absl::InternalError("cannot create a TurboJPEG compressor");
  const int subsamp = image.channels == 1 ? TJSAMP_GRAY : TJSAMP_420;
  std::string out(tjBufSize(image.width, image.height, subsamp), '\0');
  unsigned char* buffer = reinterpret_cast<unsigned char*>(out.data());
  unsigned long size = out.size();
  if (tjCompress2(handle, image.pixels.data(), image.width, 0, image.height, image.channels == 1 ? TJPF_GRAY : TJPF_RGB,
                  &buffer, &size, subsamp, quality, TJFLAG_NOREALLOC) != 0) {
    return absl::InternalError(absl::StrCat("JPEG encoding failed: ", tjGetErrorStr2(handle)));
  }
  out.resize(size);
  return out;
}

}  // namespace pstrain::image::internal
