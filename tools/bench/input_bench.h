// The input-pipeline benchmark behind `pstrain-bench input`.
//
// Makes `images` JPEGs of image_width x image_height in the run (smooth
// gradients plus seeded noise, so they compress about as photos do; quality
// 90), then for each thread count N measures, for `seconds` each:
//
//   decode    the reference: N threads each looping over the files with a
//             plain tjDecompress2 at full size to RGB (a TurboJPEG handle
//             per thread)
//   augment   the pipeline's call: N threads each looping over the files
//             with image::DecodeAugment (train: random-resized crop, flip,
//             ImageNet normalisation) into an out_size x out_size float CHW
//             buffer of its own, a fresh seed per image
//
// and reports images/sec in total and per thread, and the ratio augment /
// decode (above 1 when the scaled decode saves more than the crop costs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace pstrain::bench {

struct InputBenchOptions {
  int image_width = 500;  // 1..8192
  int image_height = 375;
  int images = 64;                    // 1..10000
  int out_size = 224;                 // 1..4096
  std::vector<int> threads = {1, 2};  // each 1..256, at least one
  double seconds = 2;                 // per phase and thread count, > 0
  uint64_t seed = 1;
};

struct InputBenchRun {
  int threads = 0;
  double decode_images_per_sec = 0;  // all threads together
  double augment_images_per_sec = 0;
  double decode_per_thread = 0;  // the totals / threads
  double augment_per_thread = 0;
  double ratio = 0;  // augment / decode
};

struct InputBenchResult {
  InputBenchOptions options;
  double mean_jpeg_bytes = 0;
  std::vector<InputBenchRun> runs;  // one per options.threads, in order
};

// InvalidArgument naming the bad option.
absl::Status ValidateInputBenchOptions(const InputBenchOptions& options);

// Runs the benchmark (after ValidateInputBenchOptions).
absl::StatusOr<InputBenchResult> RunInputBench(const InputBenchOptions& options);

// The table (several lines, newline-terminated).
std::string FormatInputBenchTable(const InputBenchResult& result);
// One JSON object on one line (no newline): image_width, image_height,
// images, out_size, seconds, mean_jpeg_bytes, runs: [{threads,
// decode_images_per_sec, decode_images_per_sec_per_thread,
// augment_images_per_sec, augment_images_per_sec_per_thread, ratio}].
std::string FormatInputBenchJson(const InputBenchResult& result);

}  // namespace pstrain::bench
