// Images for the image tests: patterns, constants, and encoding them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/data/image/codec.h"
#include "gtest/gtest.h"

namespace pstrain::image::test {

// A smooth pattern: R from x, G from y, B from both.
inline Image Pattern(int width, int height, int channels) {
  Image img{width, height, channels, {}};
  img.pixels.resize(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * width + x) * channels];
      const int r = x * 255 / std::max(1, width - 1), g = y * 255 / std::max(1, height - 1), b = (x + y) * 2 % 256;
      if (channels == 1) {
        p[0] = static_cast<uint8_t>((r + g) / 2);
      } else {
        p[0] = r, p[1] = g, p[2] = b;
      }
    }
  }
  return img;
}

inline Image Constant(int width, int height, int channels, uint8_t value) {
  return Image{width, height, channels, std::vector<uint8_t>(static_cast<size_t>(width) * height * channels, value)};
}

inline double MeanAbsDiff(const Image& a, const Image& b) {
  double sum = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) sum += std::abs(int{a.pixels[i]} - int{b.pixels[i]});
  return sum / a.pixels.size();
}

inline std::string Jpeg(const Image& img, int quality = 95) {
  absl::StatusOr<std::string> jpeg = EncodeJpeg(img, quality);
  EXPECT_TRUE(jpeg.ok()) << jpeg.status();
  return jpeg.ok() ? *jpeg : "";
}

inline std::string Png(const Image& img) {
  absl::StatusOr<std::string> png = EncodePng(img);
  EXPECT_TRUE(png.ok()) << png.status();
  return png.ok() ? *png : "";
}

}  // namespace pstrain::image::test
