#include "tools/bench/input_bench.h"

#include <turbojpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/data/image/augment.h"
#include "common/data/image/codec.h"

namespace pstrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A photo-like image: a few smooth waves per channel plus +-12 of noise.
image::Image MakePhoto(int width, int height, std::mt19937_64& gen) {
  image::Image img{width, height, 3, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  double fx[3], fy[3], phase[3];
  for (int c = 0; c < 3; ++c) {
    fx[c] = 0.002 + (gen() % 1000) * 2e-5;
    fy[c] = 0.002 + (gen() % 1000) * 2e-5;
    phase[c] = (gen() % 628) / 100.0;
  }
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double wave = 128 + 70 * std::sin(x * fx[c] * 6.28 + phase[c]) * std::cos(y * fy[c] * 6.28 - phase[c]);
        const int noise = static_cast<int>(gen() % 25) - 12;
        img.pixels[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(static_cast<int>(wave) + noise, 0, 255));
      }
    }
  }
  return img;
}

// Runs body(thread, i) for i = 0, 1, ... on each of `threads` threads until
// `seconds` have passed; returns the calls per second of all threads, or the
// first error a body returned.
absl::StatusOr<double> Throughput(int threads, double seconds,
                                  const std::function<absl::Status(int thread, int64_t i)>& body) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<int64_t> calls{0};
  std::mutex mu;
  absl::Status error;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      int64_t i = 0;
      for (; !stop.load(std::memory_order_relaxed); ++i) {
        if (absl::Status s = body(t, i); !s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (error.ok()) error = s;
          stop = true;
        }
      }
      calls += i;
    });
  }
  const Clock::time_point start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& th : pool) th.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (!error.ok()) return error;
  return calls.load() / elapsed;
}

// The reference: TurboJPEG's full-size RGB decode of the same file.
class PlainDecoder {
 public:
  PlainDecoder() : handle_(tjInitDecompress()) {}
  ~PlainDecoder() { tjDestroy(handle_); }
  PlainDecoder(const PlainDecoder&) = delete;
  PlainDecoder& operator=(const PlainDecoder&) = delete;

  absl::Status Decode(const std::string& jpeg, int width, int height) {
    pixels_.resize(static_cast<size_t>(width) * height * 3);
    auto* data = reinterpret_cast<unsigned char*>(const_cast<char*>(jpeg.data()));
    if (tjDecompress2(handle_, data, jpeg.size(), pixels_.data(), width, 0, height, TJPF_RGB, 0) != 0) {
      return absl::InternalError(absl::StrCat("tjDecompress2: ", tjGetErrorStr2(handle_)));
    }
    return absl::OkStatus();
  }

 private:
  tjhandle handle_;
  std::vector<uint8_t> pixels_;
};

absl::StatusOr<InputBenchRun> MeasureThreads(const InputBenchOptions& o, const std::vector<std::string>& files,
                                             int threads) {
  InputBenchRun run;
  run.threads = threads;
  std::vector<PlainDecoder> decoders(threads);
  const auto n = static_cast<int64_t>(files.size());
  absl::StatusOr<double> decode = Throughput(threads, o.seconds, [&](int t, int64_t i) {
    return decoders[t].Decode(files[(i + t) % n], o.image_width, o.image_height);
  });
  if (!decode.ok()) return decode.status();
  image::AugmentOptions augment;
  augment.out_height = augment.out_width = o.out_size;
  std::vector<std::vector<float>> outs(threads, std::vector<float>(3 * static_cast<size_t>(o.out_size) * o.out_size));
  absl::StatusOr<double> augmented = Throughput(threads, o.seconds, [&](int t, int64_t i) {
    const uint64_t seed = o.seed ^ (static_cast<uint64_t>(t) << 40) ^ static_cast<uint64_t>(i);
    return image::DecodeAugment(files[(i + t) % n], augment, seed, outs[t].data());
  });
  if (!augmented.ok()) return augmented.status();
  run.decode_images_per_sec = *decode;
  run.augment_images_per_sec = *augmented;
  run.decode_per_thread = *decode / threads;
  run.augment_per_thread = *augmented / threads;
  run.ratio = *augmented / *decode;
  return run;
}

}  // namespace

absl::Status ValidateInputBenchOptions(const InputBenchOptions& o) {
  auto bad = [](absl::string_view what) { return absl::InvalidArgumentError(what); };
  if (o.image_width < 1 || o.image_width > 8192 || o.image_height < 1 || o.image_height > 8192) {
    return bad(
        absl::StrCat("--image_width and --image_height must be 1..8192, got ", o.image_width, "x", o.image_height));
  }
  if (o.images < 1 || o.images > 10000) return bad(absl::StrCat("--images must be 1..10000, got ", o.images));
  if (o.out_size < 1 || o.out_size > 4096) return bad(absl::StrCat("--out_size must be 1..4096, got ", o.out_size));
  if (o.threads.empty()) return bad("--threads must list at least one thread count");
  for (int t : o.threads) {
    if (t < 1 || t > 256) return bad(absl::StrCat("--threads must be 1..256 each, got ", t));
  }
  if (!(o.seconds > 0) || o.seconds > 3600) return bad(absl::StrCat("--seconds must be in (0, 3600], got ", o.seconds));
  return absl::OkStatus();
}

absl::StatusOr<InputBenchResult> RunInputBench(const InputBenchOptions& o) {
  if (absl::Status s = ValidateInputBenchOptions(o); !s.ok()) return s;
  InputBenchResult result;
  result.options = o;
  std::mt19937_64 gen(o.seed);
  std::vector<std::string> files;
  for (int i = 0; i < o.images; ++i) {
    absl::StatusOr<std::string> jpeg = image::EncodeJpeg(MakePhoto(o.image_width, o.image_height, gen), 90);
    if (!jpeg.ok()) return jpeg.status();
    result.mean_jpeg_bytes += static_cast<double>(jpeg->size()) / o.images;
    files.push_back(*std::move(jpeg));
  }
  for (int threads : o.threads) {
    absl::StatusOr<InputBenchRun> run = MeasureThreads(o, files, threads);
    if (!run.ok()) return run.status();
    result.runs.push_back(*run);
  }
  return result;
}

std::string FormatInputBenchTable(const InputBenchResult& r) {
  const InputBenchOptions& o = r.options;
  std::string out = absl::StrFormat(
      "input: %d JPEGs of %dx%d (quality 90, %.1f KB each on average) -> %dx%d float CHW, train augmentation "
      "(random-resized crop, flip, normalisation); %.3g s per phase\n",
      o.images, o.image_width, o.image_height, r.mean_jpeg_bytes / 1e3, o.out_size, o.out_size, o.seconds);
  absl::StrAppendFormat(&out, "  %7s %16s %12s %18s %12s %7s\n", "threads", "decode img/s", "per thread",
                        "decode+aug img/s", "per thread", "ratio");
  for (const InputBenchRun& run : r.runs) {
    absl::StrAppendFormat(&out, "  %7d %16.1f %12.1f %18.1f %12.1f %7.3f\n", run.threads, run.decode_images_per_sec,
                          run.decode_per_thread, run.augment_images_per_sec, run.augment_per_thread, run.ratio);
  }
  absl::StrAppend(&out,
                  "  decode: plain tjDecompress2 at full size to RGB; decode+aug: DecodeAugment (the crop's region "
                  "only, scaled when it can be, resize, flip, normalise); ratio = decode+aug / decode\n");
  return out;
}

std::string FormatInputBenchJson(const InputBenchResult& r) {
  const InputBenchOptions& o = r.options;
  std::vector<std::string> runs;
  for (const InputBenchRun& run : r.runs) {
    runs.push_back(
        absl::StrFormat("{\"threads\":%d,\"decode_images_per_sec\":%.6g,\"decode_images_per_sec_per_thread\":%.6g,"
                        "\"augment_images_per_sec\":%.6g,\"augment_images_per_sec_per_thread\":%.6g,\"ratio\":%.4g}",
                        run.threads, run.decode_images_per_sec, run.decode_per_thread, run.augment_images_per_sec,
                        run.augment_per_thread, run.ratio));
  }
  return absl::StrFormat(
      "{\"image_width\":%d,\"image_height\":%d,\"images\":%d,\"out_size\":%d,\"seconds\":%.6g,"
      "\"mean_jpeg_bytes\":%.6g,\"runs\":[%s]}",
      o.image_width, o.image_height, o.images, o.out_size, o.seconds, r.mean_jpeg_bytes, absl::StrJoin(runs, ","));
}

}  // namespace pstrain::bench
