#include "tools/bench/model_bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/metrics/memory_usage.h"
#include "common/metrics/throughput.h"
#include "glog/logging.h"
#include "models/model.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "proto/config.pb.h"
#include "tools/bench/gpu_matmul_reference.h"

namespace pstrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// ---------------------------------------------------------------------------
// Profile: oneDNN verbose lines, captured from stdout.

// Runs `fn` with file descriptor 1 redirected to a temporary file and returns
// what was written there.
template <typename Fn>
absl::StatusOr<std::string> CaptureStdout(Fn fn) {
  std::fflush(stdout);
  char path[] = "/tmp/pstrain_bench_verbose_XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return absl::InternalError("mkstemp failed");
  const int saved = ::dup(1);
  if (saved < 0 || ::dup2(fd, 1) < 0) {
    ::close(fd);
    ::unlink(path);
    return absl::InternalError("cannot redirect stdout");
  }
  fn();
  std::fflush(stdout);
  ::dup2(saved, 1);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  return text.str();
}

// The integer after `key` in a oneDNN problem descriptor such as
// "mb32_ic64oc64_ih56oh56kh3sh1dh0ph1_iw56ow56kw3sw1dw0pw1"; `fallback` when
// absent. A key matches at the start, after '_' or after a digit (keys
// follow each other's numbers: "g2ic4oc4", "ih56oh56kh3").
int64_t ProblemInt(const std::string& desc, const std::string& key, int64_t fallback) {
  size_t pos = 0;
  while ((pos = desc.find(key, pos)) != std::string::npos) {
    const bool boundary = pos == 0 || desc[pos - 1] == '_' || std::isdigit(static_cast<unsigned char>(desc[pos - 1]));
    const size_t digits = pos + key.size();
    if (boundary && digits < desc.size() && std::isdigit(static_cast<unsigned char>(desc[digits]))) {
      return std::strtoll(desc.c_str() + digits, nullptr, 10);
    }
    pos += 1;
  }
  return fallback;
}

// FLOPs (multiply-add = 2) of one convolution or inner product execution.
double PrimitiveFlops(const std::string& kind, const std::string& desc) {
  const int64_t mb = ProblemInt(desc, "mb", 1);
  const int64_t ic = ProblemInt(desc, "ic", 1), oc = ProblemInt(desc, "oc", 1);
  if (kind == "convolution") {
    const int64_t g = ProblemInt(desc, "g", 1);
    const int64_t oh = ProblemInt(desc, "oh", 1), ow = ProblemInt(desc, "ow", 1);
    const int64_t kh = ProblemInt(desc, "kh", 1), kw = ProblemInt(desc, "kw", 1);
    return 2.0 * mb * oc * oh * ow * (ic / g) * kh * kw;
  }
  if (kind == "inner_product") {
    const int64_t ih = ProblemInt(desc, "ih", 1), iw = ProblemInt(desc, "iw", 1);
    return 2.0 * mb * oc * ic * ih * iw;
  }
  return 0;
}

// The layer type a primitive execution belongs to.
std::string LayerTypeOf(const std::string& kind, const std::string& alg, const std::string& desc) {
  if (kind == "convolution") return "conv2d";
  if (kind == "inner_product") return "dense";
  if (kind == "batch_normalization") return "batch_norm";
  if (kind == "softmax") return "softmax_cross_entropy";
  if (kind == "eltwise") return alg == "eltwise_relu" ? "relu" : absl::StrCat("eltwise:", alg);
  if (kind == "pooling") {
    if (alg == "pooling_max") return "max_pool";
    const bool global = ProblemInt(desc, "oh", 0) == 1 && ProblemInt(desc, "ow", 0) == 1 &&
                        ProblemInt(desc, "kh", -1) == ProblemInt(desc, "ih", -2) &&
                        ProblemInt(desc, "kw", -1) == ProblemInt(desc, "iw", -2);
    return global ? "global_avg_pool" : "avg_pool";
  }
  if (kind == "lrn") return "lrn";
  if (kind == "concat") return "concat";
  if (kind == "sum") return "sum";
  if (kind == "binary") return absl::StrCat("binary:", alg);
  if (kind == "reorder") return "reorder";
  return kind;
}

struct Accumulator {
  double ms = 0;
  int64_t calls = 0;
  double flops = 0;
  std::set<std::string> impls;
};

// Parses `steps` steps' worth of verbose output into rows (per step).
std::vector<ProfileRow> ParseVerbose(const std::string& text, int64_t steps, double* dnnl_ms_per_step) {
  // Key: (layer type, phase, pass).
  std::map<std::tuple<std::string, std::string, std::string>, Accumulator> acc;
  std::string phase = "forward";
  double total_ms = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "onednn_verbose,exec,") && !absl::StartsWith(line, "dnnl_verbose,exec,")) continue;
    // onednn_verbose,exec,cpu,<primitive>,<impl>,<prop>,<mds>,<attrs>,<aux>,<problem>,<ms>
    std::vector<std::string> f = absl::StrSplit(line, ',');
    if (f.size() < 11) continue;
    // oneDNN 2.x names newer primitive versions "pooling_v2", "softmax_v2".
    std::string kind = f[3];
    if (const size_t v = kind.rfind("_v");
        v != std::string::npos && v + 2 < kind.size() && std::isdigit(static_cast<unsigned char>(kind[v + 2]))) {
      kind.resize(v);
    }
    const std::string& impl = f[4];
    const std::string& prop = f[5];
    const std::string& desc = f[f.size() - 2];
    double ms = 0;
    if (!absl::SimpleAtod(f.back(), &ms)) continue;
    std::string alg;
    for (size_t i = 6; i + 1 < f.size(); ++i) {
      for (absl::string_view part : absl::StrSplit(f[i], ' ')) {
        if (absl::StartsWith(part, "alg:")) alg = std::string(part.substr(4));
      }
    }
    const std::string type = LayerTypeOf(kind, alg, desc);
    if (kind == "softmax") {
      phase = "loss";
    } else if (phase == "loss") {
      phase = "backward";
    }
    // A new step starts with a forward-propagation primitive after backward.
    if (phase == "backward" && absl::StartsWith(prop, "forward")) phase = "forward";
    const bool by_pass = kind == "convolution" || kind == "inner_product";
    Accumulator& a = acc[{type, phase, by_pass ? prop : ""}];
    a.ms += ms;
    a.calls += 1;
    a.flops += PrimitiveFlops(kind, desc);
    a.impls.insert(impl);
    total_ms += ms;
  }
  std::vector<ProfileRow> rows;
  for (const auto& [key, a] : acc) {
    ProfileRow r;
    std::tie(r.layer_type, r.phase, r.pass) = key;
    r.ms_per_step = a.ms / steps;
    r.calls_per_step = static_cast<double>(a.calls) / steps;
    r.gflop_per_step = a.flops / steps / 1e9;
    r.implementations = absl::StrJoin(a.impls, ",");
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(),
            [](const ProfileRow& x, const ProfileRow& y) { return x.ms_per_step > y.ms_per_step; });
  *dnnl_ms_per_step = total_ms / steps;
  return rows;
}

}  // namespace

Shape DefaultInputShape(const std::string& model) {
  if (model == "inception3") return {3, 299, 299};
  if (model == "lenet" || model == "mlp" || model == "trivial") return {1, 28, 28};
  return {3, 224, 224};
}

absl::Status ValidateModelBenchOptions(const ModelBenchOptions& o) {
  if (o.model.empty()) return absl::InvalidArgumentError("--model is required");
  if (o.device != "cpu" && o.device != "gpu") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be cpu or gpu, got '", o.device, "'"));
  }
  if (o.device == "gpu" && o.profile) {
    return absl::InvalidArgumentError("--profile reads oneDNN's verbose output: CPU only (use nsys on a GPU)");
  }
  if (absl::Status s = ParsePrecision(o.precision).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--precision: ", s.message()));
  }
  if (o.batch_size <= 0)
    return absl::InvalidArgumentError(absl::StrCat("--batch_size must be > 0, got ", o.batch_size));
  if (o.steps <= 0) return absl::InvalidArgumentError(absl::StrCat("--steps must be > 0, got ", o.steps));
  if (o.warmup < 0) return absl::InvalidArgumentError(absl::StrCat("--warmup must be >= 0, got ", o.warmup));
  if (!o.input_shape.empty()) {
    if (o.input_shape.size() != 3 || *std::min_element(o.input_shape.begin(), o.input_shape.end()) <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--input_shape must be three positive dims C,H,W, got ", absl::StrJoin(o.input_shape, ",")));
    }
  }
  if (o.num_classes <= 1) {
    return absl::InvalidArgumentError(absl::StrCat("--num_classes must be > 1, got ", o.num_classes));
  }
  if (o.matmul_size <= 0 || o.matmul_reps <= 0) {
    return absl::InvalidArgumentError("matmul size and repetitions must be > 0");
  }
  if (o.profile && o.profile_steps <= 0) return absl::InvalidArgumentError("profile steps must be > 0");
  return absl::OkStatus();
}

absl::StatusOr<ModelBenchResult> RunModelBench(const ModelBenchOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(ValidateModelBenchOptions(options));
  ModelBenchResult result;
  result.model = options.model;
  result.input_shape = options.input_shape.empty() ? DefaultInputShape(options.model) : options.input_shape;
  result.num_classes = options.num_classes;
  result.batch_size = options.batch_size;
  result.steps = options.steps;
  result.warmup = options.warmup;
  result.threads = DnnlThreads();
  result.device = options.device;
  const bool gpu = options.device == "gpu";
  result.matmul_name = gpu ? "cuBLAS sgemm" : "oneDNN sgemm";
  auto measure_matmul = [&](int64_t size, int reps) -> absl::StatusOr<MatmulReference> {
    if (gpu) return MeasureGpuMatmul(0, size, size, size, reps);
    return MeasureMatmul(size, size, size, reps);
  };

  // 0. The roofline, first half: measured before the model exists (and again
  // after the steps; the best counts), so a moment of load from other
  // processes on a shared machine does not flatter the ratio.
  const int64_t mm = options.matmul_size;
  const int reps_before = std::max(1, options.matmul_reps / 2);
  PSTRAIN_ASSIGN_OR_RETURN(const MatmulReference before, measure_matmul(mm, reps_before));

  // 1. The model.
  const auto setup_start = Clock::now();
  ModelConfig config;
  config.set_name(options.model);
  for (int64_t d : result.input_shape) config.add_input_shape(static_cast<int32_t>(d));
  config.set_num_classes(options.num_classes);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceContext> ctx,
                           CreateDeviceContext(gpu ? Device{DeviceKind::kCuda, 0} : Device::Cpu()));
  if (absl::Status s = ctx->SetPrecision(*ParsePrecision(options.precision)); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--precision: ", s.message()));
  }
  result.precision = options.precision;
  absl::StatusOr<std::unique_ptr<Model>> created = CreateModel(config, ctx.get());
  if (!created.ok()) {
    // A model that does not build is a usage problem (name, shape).
    return absl::InvalidArgumentError(created.status().message());
  }
  std::unique_ptr<Model> model = *std::move(created);
  model->InitializeVariables(options.seed);
  result.num_parameters = model->num_parameters();
  result.forward_gflop_per_image = static_cast<double>(model->ForwardFlopsPerExample()) / 1e9;
  result.gflop_per_image = 3 * result.forward_gflop_per_image;
  result.setup_seconds = SecondsSince(setup_start);

  // 2. One synthetic batch.
  Shape batch_shape = {options.batch_size};
  batch_shape.insert(batch_shape.end(), result.input_shape.begin(), result.input_shape.end());
  Tensor images(batch_shape);
  std::vector<int32_t> labels(options.batch_size);
  {
    std::mt19937_64 rng(options.seed);
    std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
    for (float& v : images.span()) v = pixel(rng);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng() % options.num_classes);
  }
  if (gpu) {  // the batch lives on the GPU, as a data pipeline with prefetch would leave it
    Tensor on_device = ctx->Allocate(batch_shape);
    ctx->Convert(images, on_device);
    images = on_device;
  }

  std::ostream* out = options.progress;
  if (out != nullptr) {
    *out << absl::StrFormat(
                "Model:       %s (%d parameters)\nInput:       [%s], %d classes, synthetic\n"
                "Batch size:  %d\nDevices:     ['%s'] (%d oneDNN threads)\nPrecision:   %s\nMode:        training "
                "(forward + backward, no optimizer)\nWarm-up:     %d steps\nSetup:       %.2f s\n==========\n"
                "Step\tImg/sec\ttotal_loss\n",
                result.model, result.num_parameters, absl::StrJoin(result.input_shape, ", "), result.num_classes,
                result.batch_size, gpu ? "gpu:0" : "cpu", result.threads, options.precision, result.warmup,
                result.setup_seconds)
         << std::flush;
  }

  // 3. Warm-up, then measured steps.
  int64_t allocations_after_first_step = -1;
  auto after_step = [&] {
    if (allocations_after_first_step < 0) allocations_after_first_step = ctx->memory_stats().backend_allocations;
  };
  for (int64_t s = 0; s < options.warmup; ++s) {
    const float loss = model->TrainStep(images, labels.data(), nullptr);
    if (!std::isfinite(loss)) return absl::InternalError(absl::StrCat("loss is ", loss, " in warm-up step ", s));
    after_step();
  }
  ctx->Synchronize();
  ThroughputTracker tracker(options.batch_size, /*warmup_steps=*/0);
  for (int64_t s = 0; s < options.steps; ++s) {
    const auto t0 = Clock::now();
    const float loss = model->TrainStep(images, labels.data(), nullptr);
    ctx->Synchronize();  // on a GPU, backward is still queued when the loss is back
    const double seconds = std::max(SecondsSince(t0), 1e-9);
    if (!std::isfinite(loss)) return absl::InternalError(absl::StrCat("loss is ", loss, " in step ", s));
    after_step();
    tracker.RecordStep(s, seconds);
    result.step_seconds.push_back(seconds);
    result.losses.push_back(loss);
    if (out != nullptr) *out << tracker.ProgressLine(s, loss) << std::endl;
  }
  result.images_per_sec = tracker.mean_images_per_sec();
  result.images_per_sec_stddev = tracker.stddev();
  result.achieved_gflops = result.images_per_sec * result.gflop_per_image;
  if (out != nullptr) {
    *out << "----------------------------------------------------------------\n"
         << absl::StrFormat("total images/sec: %.2f\n", result.images_per_sec)
         << "----------------------------------------------------------------" << std::endl;
  }

  // 4. Profile (optional): more steps with oneDNN verbose on.
  if (options.profile) {
    double wall = 0;
    absl::StatusOr<std::string> text = CaptureStdout([&] {
      dnnl::set_verbose(1);
      const auto t0 = Clock::now();
      for (int64_t s = 0; s < options.profile_steps; ++s) model->TrainStep(images, labels.data(), nullptr);
      wall = SecondsSince(t0);
      dnnl::set_verbose(0);
    });
    if (!text.ok()) return text.status();
    result.profile = ParseVerbose(*text, options.profile_steps, &result.profile_dnnl_ms);
    result.profile_step_ms = wall * 1e3 / options.profile_steps;
  }

  // 5. Peak memory of the training, then the roofline beside it.
  result.peak_rss_bytes = PeakRssBytes();
  result.step_memory = model->LastStepMemory(/*training=*/true);
  const DeviceContext::MemoryStats device_memory = ctx->memory_stats();
  result.peak_device_bytes = device_memory.peak_bytes_in_use;
  result.device_allocations_after_first_step = device_memory.backend_allocations - allocations_after_first_step;
  if (gpu) {  // the GPU reference gets the device (and its memory) to itself
    model.reset();
    images = Tensor();
    ctx.reset();
  }
  PSTRAIN_ASSIGN_OR_RETURN(const MatmulReference after,
                           measure_matmul(mm, std::max(1, options.matmul_reps - reps_before)));
  result.matmul = after.gflops >= before.gflops ? after : before;
  result.matmul.reps = before.reps + after.reps;
  // Over all repetitions: total FLOPs / total seconds.
  const double seconds = before.reps / before.mean_gflops + after.reps / after.mean_gflops;
  result.matmul.mean_gflops = (before.reps + after.reps) / seconds;
  result.ratio = result.matmul.gflops > 0 ? result.achieved_gflops / result.matmul.gflops : 0;
  const double best_step = *std::min_element(result.step_seconds.begin(), result.step_seconds.end());
  result.best_images_per_sec = options.batch_size / best_step;
  result.best_achieved_gflops = result.best_images_per_sec * result.gflop_per_image;
  result.best_ratio = result.matmul.gflops > 0 ? result.best_achieved_gflops / result.matmul.gflops : 0;
  if (!gpu && options.precision == "bf16") {
    result.bf16_matmul = MeasureBf16Matmul(mm, mm, mm, options.matmul_reps);
    result.bf16_ratio = result.achieved_gflops / result.bf16_matmul.gflops;
    result.best_bf16_ratio = result.best_achieved_gflops / result.bf16_matmul.gflops;
  }
  return result;
}

std::string FormatModelBenchSummary(const ModelBenchResult& r) {
  std::string out;
  absl::StrAppendFormat(&out, "%-22s %.3f GFLOP training (= 3 x %.3f GFLOP forward; multiply-add = 2 FLOPs)\n",
                        "FLOPs per image:", r.gflop_per_image, r.forward_gflop_per_image);
  absl::StrAppendFormat(&out, "%-22s %.1f GFLOP/s (images/sec x training FLOPs per image)\n",
                        "Achieved:", r.achieved_gflops);
  absl::StrAppendFormat(&out, "%-22s %.1f GFLOP/s (%s %dx%dx%d fp32, best of %d%s)\n",
                        "Matmul reference:", r.matmul.gflops, r.matmul_name, r.matmul.m, r.matmul.n, r.matmul.k,
                        r.matmul.reps, r.device == "gpu" ? "" : absl::StrCat(", ", r.threads, " threads"));
  absl::StrAppendFormat(&out, "%-22s %.3f (achieved / matmul)\n", "Ratio:", r.ratio);
  absl::StrAppendFormat(&out, "%-22s %.2f images/sec, %.1f GFLOP/s, ratio %.3f\n",
                        "Fastest step:", r.best_images_per_sec, r.best_achieved_gflops, r.best_ratio);
  if (r.bf16_matmul.gflops > 0) {
    absl::StrAppendFormat(&out, "%-22s %.1f GFLOP/s (oneDNN matmul bf16 x bf16 -> f32 %dx%dx%d, best of %d)\n",
                          "bf16 matmul:", r.bf16_matmul.gflops, r.bf16_matmul.m, r.bf16_matmul.n, r.bf16_matmul.k,
                          r.bf16_matmul.reps);
    absl::StrAppendFormat(&out, "%-22s %.3f (achieved / bf16 matmul; fastest step %.3f)\n",
                          "Ratio to bf16 matmul:", r.bf16_ratio, r.best_bf16_ratio);
  }
  absl::StrAppendFormat(&out, "%-22s %.2f GiB (%d bytes, ru_maxrss)\n", "Peak RSS:", ToGib(r.peak_rss_bytes),
                        r.peak_rss_bytes);
  const StepMemory& m = r.step_memory;
  absl::StrAppendFormat(&out,
                        "%-22s %.2f GiB arena for %d activations, gradients and scratch (%.2f GiB as separate "
                        "buffers; live peak %.2f GiB)\n",
                        "Step memory:", ToGib(m.arena_bytes), m.buffers, ToGib(m.separate_bytes),
                        ToGib(m.live_peak_bytes));
  if (r.device == "gpu") {
    absl::StrAppendFormat(&out, "%-22s %.2f GiB in use at most; %d cudaMalloc calls after the first step\n",
                          "Peak device memory:", ToGib(r.peak_device_bytes), r.device_allocations_after_first_step);
  }
  return out;
}

std::string FormatModelBenchProfile(const ModelBenchResult& r) {
  if (r.profile.empty() && r.profile_step_ms == 0) return "";
  std::string out = absl::StrFormat(
      "Profile (oneDNN verbose, per step): wall %.1f ms, in oneDNN primitives %.1f ms, outside oneDNN %.1f ms\n",
      r.profile_step_ms, r.profile_dnnl_ms, r.profile_step_ms - r.profile_dnnl_ms);
  absl::StrAppendFormat(&out, "%-22s %-9s %-17s %10s %6s %8s %9s  %s\n", "layer type", "phase", "pass", "ms/step",
                        "%wall", "calls", "GFLOP/s", "implementations");
  for (const ProfileRow& row : r.profile) {
    const std::string gflops = row.gflop_per_step > 0 && row.ms_per_step > 0
                                   ? absl::StrFormat("%.1f", row.gflop_per_step / row.ms_per_step * 1e3)
                                   : "-";
    absl::StrAppendFormat(&out, "%-22s %-9s %-17s %10.2f %5.1f%% %8.0f %9s  %s\n", row.layer_type, row.phase,
                          row.pass.empty() ? "-" : row.pass, row.ms_per_step,
                          r.profile_step_ms > 0 ? 100 * row.ms_per_step / r.profile_step_ms : 0, row.calls_per_step,
                          gflops, row.implementations);
  }
  absl::StrAppendFormat(&out, "%-22s %-9s %-17s %10.2f %5.1f%%\n", "(outside oneDNN)", "-", "-",
                        r.profile_step_ms - r.profile_dnnl_ms,
                        r.profile_step_ms > 0 ? 100 * (r.profile_step_ms - r.profile_dnnl_ms) / r.profile_step_ms : 0);
  // Per phase totals.
  std::map<std::string, double> by_phase;
  for (const ProfileRow& row : r.profile) by_phase[row.phase] += row.ms_per_step;
  for (const auto& [phase, ms] : by_phase) absl::StrAppendFormat(&out, "  %s total: %.2f ms/step\n", phase, ms);
  return out;
}

std::string FormatModelBenchJson(const ModelBenchResult& r) {
  std::string out = absl::StrFormat(
      "{\"model\":%s,\"device\":%s,\"precision\":%s,\"matmul_reference\":%s,\"batch_size\":%d,\"steps\":%d,\"warmup\":%"
      "d,\"input_"
      "shape\":[%s],\"num_classes\":%d,"
      "\"threads\":%d,\"num_parameters\":%d,\"images_per_sec\":%s,\"images_per_sec_stddev\":%s,"
      "\"forward_gflop_per_image\":%s,\"gflop_per_image\":%s,\"achieved_gflops\":%s,\"matmul_gflops\":%s,"
      "\"matmul_size\":%d,\"ratio\":%s,\"best_images_per_sec\":%s,\"best_achieved_gflops\":%s,"
      "\"best_ratio\":%s,\"peak_rss_bytes\":%d,\"step_arena_bytes\":%d,\"step_separate_bytes\":%d,"
      "\"step_live_peak_bytes\":%d,\"peak_device_bytes\":%d,\"device_allocations_after_first_step\":%d,"
      "\"setup_seconds\":%s",
      JsonString(r.model), JsonString(r.device), JsonString(r.precision), JsonString(r.matmul_name), r.batch_size,
      r.steps, r.warmup, absl::StrJoin(r.input_shape, ","), r.num_classes, r.threads, r.num_parameters,
      JsonNumber(r.images_per_sec), JsonNumber(r.images_per_sec_stddev), JsonNumber(r.forward_gflop_per_image),
      JsonNumber(r.gflop_per_image), JsonNumber(r.achieved_gflops), JsonNumber(r.matmul.gflops), r.matmul.m,
      JsonNumber(r.ratio), JsonNumber(r.best_images_per_sec), JsonNumber(r.best_achieved_gflops),
      JsonNumber(r.best_ratio), r.peak_rss_bytes, r.step_memory.arena_bytes, r.step_memory.separate_bytes,
      r.step_memory.live_peak_bytes, r.peak_device_bytes, r.device_allocations_after_first_step,
      JsonNumber(r.setup_seconds));
  if (r.bf16_matmul.gflops > 0) {
    absl::StrAppendFormat(&out, ",\"bf16_matmul_gflops\":%s,\"bf16_ratio\":%s,\"best_bf16_ratio\":%s",
                          JsonNumber(r.bf16_matmul.gflops), JsonNumber(r.bf16_ratio), JsonNumber(r.best_bf16_ratio));
  }
  if (r.profile_step_ms > 0) {
    absl::StrAppendFormat(&out, ",\"profile_step_ms\":%s,\"profile_dnnl_ms\":%s,\"profile\":[",
                          JsonNumber(r.profile_step_ms), JsonNumber(r.profile_dnnl_ms));
    for (size_t i = 0; i < r.profile.size(); ++i) {
      const ProfileRow& row = r.profile[i];
      absl::StrAppendFormat(&out,
                            "%s{\"layer_type\":%s,\"phase\":%s,\"pass\":%s,\"ms_per_step\":%s,\"calls_per_step\":%s,"
                            "\"gflop_per_step\":%s,\"implementations\":%s}",
                            i == 0 ? "" : ",", JsonString(row.layer_type), JsonString(row.phase), JsonString(row.pass),
                            JsonNumber(row.ms_per_step), JsonNumber(row.calls_per_step), JsonNumber(row.gflop_per_step),
                            JsonString(row.implementations));
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace pstrain::bench
