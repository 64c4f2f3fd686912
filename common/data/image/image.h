// A decoded image in memory: 8-bit samples, rows top to bottom, pixels left
// to right, channels interleaved (HWC): grey (1 channel) or RGB (3).
#pragma once

#include <cstdint>
#include <vector>

namespace pstrain::image {

struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;             // 1 (grey) or 3 (RGB)
  std::vector<uint8_t> pixels;  // width * height * channels bytes
};

}  // namespace pstrain::image
