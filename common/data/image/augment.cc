#include "common/data/image/augment.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/data/image/jpeg_region.h"

namespace pstrain::image {
namespace {

constexpr int kTrainAttempts = 10;

// SplitMix64: tiny, portable, and the same stream for a seed everywhere.
// (common/data/portable_random.h is pstrain_data's, which links this library,
// and draws from std::mt19937_64, heavier to seed per image.)
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi) with 53 random bits.
  double Uniform(double lo, double hi) { return lo + (hi - lo) * (static_cast<double>(Next() >> 11) * 0x1.0p-53); }
  // Uniform integer in [0, n), n > 0 (multiply-high; the bias is below 2^-40 for n < 2^24).
  int Below(int n) {
    return static_cast<int>((static_cast<unsigned __int128>(Next()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  uint64_t state_;
};

// torchvision's fallback: the whole image, cut to the nearest allowed ratio, centred.
CropBox CentreFallback(int width, int height, const AugmentOptions& o) {
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < o.min_ratio) {
    h = std::clamp(static_cast<int>(std::lround(w / static_cast<double>(o.min_ratio))), 1, height);
  } else if (in_ratio > o.max_ratio) {
    w = std::clamp(static_cast<int>(std::lround(h * static_cast<double>(o.max_ratio))), 1, width);
  }
  return CropBox{static_cast<float>((width - w) / 2), static_cast<float>((height - h) / 2), static_cast<float>(w),
                 static_cast<float>(h)};
}

CropBox RandomResizedCrop(int width, int height, const AugmentOptions& o, SplitMix64& rng) {
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(static_cast<double>(o.min_ratio));
  const double log_hi = std::log(static_cast<double>(o.max_ratio));
  for (int attempt = 0; attempt < kTrainAttempts; ++attempt) {
    const double target = area * rng.Uniform(o.min_area, o.max_area);
    const double ratio = std::exp(rng.Uniform(log_lo, log_hi));
    const long w = std::lround(std::sqrt(target * ratio));
    const long h = std::lround(std::sqrt(target / ratio));
    if (w <= 0 || h <= 0 || w > width || h > height) continue;
    const int x = rng.Below(width - static_cast<int>(w) + 1);
    const int y = rng.Below(height - static_cast<int>(h) + 1);
    return CropBox{static_cast<float>(x), static_cast<float>(y), static_cast<float>(w), static_cast<float>(h)};
  }
  return CentreFallback(width, height, o);
}

// Resize so the shorter side is max(out)/fraction, then the centre out crop;
// in source pixels.
CropBox EvalCrop(int width, int height, const AugmentOptions& o) {
  const double shorter = std::min(width, height);
  const double resized = std::max(o.out_height, o.out_width) / static_cast<double>(o.eval_crop_fraction);
  const double w = o.out_width * shorter / resized;
  const double h = o.out_height * shorter / resized;
  return CropBox{static_cast<float>((width - w) / 2), static_cast<float>((height - h) / 2), static_cast<float>(w),
                 static_cast<float>(h)};
}

// One output coordinate's bilinear taps along an axis: sample offsets (in
// elements) and the weight of the second.
struct Taps {
  int first = 0;
  int second = 0;
  float weight = 0;
};

// Taps for `out` output positions over [start, start + length) of an axis of
// `size` pixels whose neighbours are `stride` elements apart.
std::vector<Taps> AxisTaps(int out, float start, float length, int size, int stride, bool mirror) {
  std::vector<Taps> taps(out);
  const double step = static_cast<double>(length) / out;
  for (int i = 0; i < out; ++i) {
    const int from = mirror ? out - 1 - i : i;
    const double s = std::clamp(start + (from + 0.5) * step - 0.5, 0.0, static_cast<double>(size - 1));
    const int lo = static_cast<int>(s);
    taps[i] = Taps{lo * stride, std::min(lo + 1, size - 1) * stride, static_cast<float>(s - lo)};
  }
  return taps;
}

absl::Status CheckRange(absl::string_view name, double value, double lo, double hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("augment: ", name, " must be in [", lo, ", ", hi, "], got ", value));
}

}  // namespace

absl::Status ValidateAugmentOptions(const AugmentOptions& o) {
  if (o.channels != 1 && o.channels != 3) {
    return absl::InvalidArgumentError(absl::StrCat("augment: channels must be 1 or 3, got ", o.channels));
  }
  for (absl::Status s :
       {CheckRange("out_height", o.out_height, 1, kMaxImageSide),
        CheckRange("out_width", o.out_width, 1, kMaxImageSide), CheckRange("min_area", o.min_area, 1e-6, o.max_area),
        CheckRange("max_area", o.max_area, 0, 1), CheckRange("min_ratio", o.min_ratio, 1e-3, o.max_ratio),
        CheckRange("max_ratio", o.max_ratio, 0, 1e3),
        CheckRange("eval_crop_fraction", o.eval_crop_fraction, 1e-3, 1)}) {
    if (!s.ok()) return s;
  }
  for (int c = 0; c < o.channels; ++c) {
    if (!(std::abs(o.norm.stddev[c]) > 0) || !std::isfinite(o.norm.stddev[c]) || !std::isfinite(o.norm.mean[c])) {
      return absl::InvalidArgumentError(absl::StrCat("augment: norm of channel ", c, " must be finite, stddev not 0"));
    }
  }
  return absl::OkStatus();
}

CropBox ChooseCrop(int width, int height, const AugmentOptions& o, uint64_t seed, bool* flip) {
  *flip = false;
  if (!o.train) return EvalCrop(width, height, o);
  SplitMix64 rng(seed);
  const CropBox box = RandomResizedCrop(width, height, o, rng);
  *flip = o.flip && (rng.Next() >> 63) != 0;
  return box;
}

void AugmentInto(const Image& img, const CropBox& box, bool flip, const AugmentOptions& o, float* out) {
  const int src_channels = img.channels;
  std::vector<Taps> cols = AxisTaps(o.out_width, box.x, box.width, img.width, src_channels, flip);
  const std::vector<Taps> rows = AxisTaps(o.out_height, box.y, box.height, img.height, img.width * src_channels, false);
  float scale[3], bias[3];
  for (int c = 0; c < o.channels; ++c) {
    scale[c] = 1.0f / (255.0f * o.norm.stddev[c]);
    bias[c] = -o.norm.mean[c] / o.norm.stddev[c];
  }
  const size_t plane = static_cast<size_t>(o.out_height) * o.out_width;
  // Separable: each output row first blends its two source rows over the
  // span the column taps reach (contiguous, vectorised), then takes two
  // horizontal taps per pixel from that blend, one output plane at a time.
  int span_begin = cols[0].first, span_end = cols[0].second;
  for (const Taps& t : cols) {
    span_begin = std::min({span_begin, t.first, t.second});
    span_end = std::max({span_end, t.first, t.second});
  }
  span_end += src_channels;
  for (Taps& t : cols) {  // now offsets into the blended span
    t.first -= span_begin;
    t.second -= span_begin;
  }
  std::vector<float> mixed(span_end - span_begin);
  const uint8_t* pixels = img.pixels.data();
  for (int y = 0; y < o.out_height; ++y) {
    const uint8_t* top = pixels + rows[y].first + span_begin;
    const uint8_t* bottom = pixels + rows[y].second + span_begin;
    const float fy = rows[y].weight;
    for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = top[i] + fy * (static_cast<float>(bottom[i]) - top[i]);
    for (int c = 0; c < o.channels; ++c) {
      const float* m = mixed.data() + (src_channels == 1 ? 0 : c);
      float* row_out = out + c * plane + static_cast<size_t>(y) * o.out_width;
      for (int x = 0; x < o.out_width; ++x) {
        const Taps& t = cols[x];
        const float a = m[t.first], b = m[t.second];
        row_out[x] = (a + t.weight * (b - a)) * scale[c] + bias[c];
      }
    }
  }
}

namespace {

// The largest of 1/8, 1/4, 1/2 (libjpeg-turbo's SIMD scales; see
// jpeg_codec.cc) at which `box` still spans the output's pixels; 1 if none.
int ScaleDenominator(const CropBox& box, const AugmentOptions& o) {
  for (int denom : {8, 4, 2}) {
    if (box.width / denom >= o.out_width && box.height / denom >= o.out_height) return denom;
  }
  return 1;
}

// A JPEG: only the crop's rows and columns (plus one pixel of margin for the
// bilinear taps) are decoded, at the scale ScaleDenominator picks.
absl::Status DecodeAugmentJpeg(absl::string_view encoded, const ImageInfo& info, CropBox box, bool flip,
                               const AugmentOptions& o, float* out) {
  const int denom = ScaleDenominator(box, o);
  const float s = 1.0f / denom;
  const int x0 = static_cast<int>(std::floor(box.x * s)) - 1, y0 = static_cast<int>(std::floor(box.y * s)) - 1;
  const int x1 = static_cast<int>(std::ceil((box.x + box.width) * s)) + 1;
  const int y1 = static_cast<int>(std::ceil((box.y + box.height) * s)) + 1;
  absl::StatusOr<internal::JpegRegion> r =
      internal::DecodeJpegRegion(encoded, o.channels, denom, internal::PixelRect{x0, y0, x1 - x0, y1 - y0});
  if (!r.ok()) return r.status();
  // The box in the region's pixels (the scaled size may round up).
  const float sx = static_cast<float>(r->scaled_width) / info.width;
  const float sy = static_cast<float>(r->scaled_height) / info.height;
  box = CropBox{box.x * sx - r->at.x, box.y * sy - r->at.y, box.width * sx, box.height * sy};
  AugmentInto(r->image, box, flip, o, out);
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodeAugment(absl::string_view encoded, const AugmentOptions& o, uint64_t seed, float* out) {
  if (absl::Status s = ValidateAugmentOptions(o); !s.ok()) return s;
  absl::StatusOr<ImageInfo> info = ReadImageInfo(encoded);
  if (!info.ok()) return info.status();
  bool flip = false;
  CropBox box = ChooseCrop(info->width, info->height, o, seed, &flip);
  if (info->format == ImageFormat::kJpeg) return DecodeAugmentJpeg(encoded, *info, box, flip, o, out);
  absl::StatusOr<Image> img = DecodeImage(encoded, o.channels);
  if (!img.ok()) return img.status();
  AugmentInto(*img, box, flip, o, out);
  return absl::OkStatus();
}

}  // namespace pstrain::image
