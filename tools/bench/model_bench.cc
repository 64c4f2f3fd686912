#include "tools/bench/model_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/metrics/memory_usage.h"
#include "common/metrics/throughput.h"
#include "glog/logging.h"
#include "models/model.h"
#include "proto/config.pb.h"
#include "tools/bench/gpu_matmul_reference.h"

#ifdef PSTRAIN_WITH_CUDA
#include "device/cuda/cuda_context.h"
#include "device/cuda/half_nhwc_layout.h"
#endif

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

// The model under test and its one synthetic batch, on the benchmark's
// device (whose context must outlive them: declared first, it goes last).
struct BenchModel {
  std::unique_ptr<DeviceContext> ctx;
  std::unique_ptr<Model> model;
  Tensor images;
  std::vector<int32_t> labels;
  // The device's cudaMalloc count after the first step; -1 before it.
  int64_t allocations_after_first_step = -1;

  // One training step on the batch (forward, loss, backward); its loss.
  float TrainStep() { return model->TrainStep(images, labels.data(), nullptr); }
  // Call after each warm-up or measured step.
  void StepDone() {
    if (allocations_after_first_step < 0) allocations_after_first_step = ctx->memory_stats().backend_allocations;
  }
  // Frees the model, the batch and the device context, in that order.
  void Release() {
    model.reset();
    images = Tensor();
    ctx.reset();
  }
};

// The run's options as the result repeats them.
ModelBenchResult DescribeRun(const ModelBenchOptions& options) {
  ModelBenchResult result;
  result.model = options.model;
  result.input_shape = options.input_shape.empty() ? DefaultInputShape(options.model) : options.input_shape;
  result.num_classes = options.num_classes;
  result.batch_size = options.batch_size;
  result.steps = options.steps;
  result.warmup = options.warmup;
  result.threads = DnnlThreads();
  result.device = options.device;
  result.precision = options.precision;
  result.matmul_name = options.device == "gpu" ? "cuBLAS sgemm" : "oneDNN sgemm";
  return result;
}

// `reps` repetitions of the device's sgemm on m = n = k = matmul_size.
absl::StatusOr<MatmulReference> MeasureSgemm(const ModelBenchOptions& options, int reps) {
  const int64_t size = options.matmul_size;
  if (options.device == "gpu") return MeasureGpuMatmul(0, size, size, size, reps);
  return MeasureMatmul(size, size, size, reps);
}

// The model built on its device and initialised; fills the result's
// parameter count, FLOPs and setup time. InvalidArgument for a model that
// does not build (a usage problem: name, shape) or a precision the device
// refuses.
// ModelBenchResult::activations for `ctx`, its precision set.
std::string ActivationFormat(DeviceContext& ctx) {
#ifdef PSTRAIN_WITH_CUDA
  if (ctx.device().kind == DeviceKind::kCuda) {
    if (const cuda::HalfNhwcLayout* half = cuda::AsHalfNhwc(cuda::AsCuda(ctx).ActivationLayout({1, 1, 1, 1}))) {
      return absl::StrCat(cuda::HalfTypeName(half->type()), " nhwc");
    }
  }
#endif
  return "float32";
}

absl::StatusOr<BenchModel> BuildModel(const ModelBenchOptions& options, ModelBenchResult& result) {
  const auto setup_start = Clock::now();
  ModelConfig config;
  config.set_name(options.model);
  for (int64_t d : result.input_shape) config.add_input_shape(static_cast<int32_t>(d));
  config.set_num_classes(options.num_classes);
  BenchModel bench;
  PSTRAIN_ASSIGN_OR_RETURN(bench.ctx,
                           CreateDeviceContext(options.device == "gpu" ? Device{DeviceKind::kCuda, 0} : Device::Cpu()));
  if (absl::Status s = bench.ctx->SetPrecision(*ParsePrecision(options.precision)); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--precision: ", s.message()));
  }
  bench.ctx->SetFp32Math(*ParseFp32Math(options.fp32_math));
  result.fp32_math = Fp32MathName(bench.ctx->fp32_math());
  result.activations = ActivationFormat(*bench.ctx);
  absl::StatusOr<std::unique_ptr<Model>> created = CreateModel(config, bench.ctx.get());
  if (!created.ok()) return absl::InvalidArgumentError(created.status().message());
  bench.model = *std::move(created);
  bench.model->InitializeVariables(options.seed);
  result.num_parameters = bench.model->num_parameters();
  result.forward_gflop_per_image = static_cast<double>(bench.model->ForwardFlopsPerExample()) / 1e9;
  result.gflop_per_image = 3 * result.forward_gflop_per_image;
  result.setup_seconds = SecondsSince(setup_start);
  return bench;
}

// One fixed batch from `seed`: images uniform in [-1, 1], uniform labels;
// on the GPU the images live there, as a data pipeline with prefetch would
// leave them.
void MakeSyntheticBatch(const ModelBenchOptions& options, const Shape& input_shape, BenchModel& bench) {
  Shape batch_shape = {options.batch_size};
  batch_shape.insert(batch_shape.end(), input_shape.begin(), input_shape.end());
  bench.images = Tensor(batch_shape);
  bench.labels.resize(options.batch_size);
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<float> pixel(-1.0f, 1.0f);
  for (float& v : bench.images.span()) v = pixel(rng);
  for (int32_t& l : bench.labels) l = static_cast<int32_t>(rng() % options.num_classes);
  if (options.device == "gpu") {
    Tensor on_device = bench.ctx->Allocate(batch_shape);
    bench.ctx->Convert(bench.images, on_device);
    bench.images = on_device;
  }
}

// tf_cnn_benchmarks' banner, before the progress lines.
void PrintBanner(const ModelBenchResult& result, std::ostream& out) {
  out << absl::StrFormat(
             "Model:       %s (%d parameters)\nInput:       [%s], %d classes, synthetic\n"
             "Batch size:  %d\nDevices:     ['%s'] (%d oneDNN threads)\nPrecision:   %s%s\nMode:        training "
             "(forward + backward, no optimizer)\nWarm-up:     %d steps\nSetup:       %.2f s\n==========\n"
             "Step\tImg/sec\ttotal_loss\n",
             result.model, result.num_parameters, absl::StrJoin(result.input_shape, ", "), result.num_classes,
             result.batch_size, result.device == "gpu" ? "gpu:0" : "cpu", result.threads,
             DescribeArithmetic(*ParsePrecision(result.precision), *ParseFp32Math(result.fp32_math)),
             result.activations == "float32" ? "" : absl::StrCat("; activations ", result.activations), result.warmup,
             result.setup_seconds)
      << std::flush;
}

// `warmup` untimed steps, then `steps` timed ones (each synchronised with
// the device) with a progress line each; fills the step times, losses,
// images/sec and achieved GFLOP/s. Internal for a loss that is not finite.
absl::Status RunSteps(const ModelBenchOptions& options, BenchModel& bench, ModelBenchResult& result) {
  for (int64_t s = 0; s < options.warmup; ++s) {
    const float loss = bench.TrainStep();
    if (!std::isfinite(loss)) return absl::InternalError(absl::StrCat("loss is ", loss, " in warm-up step ", s));
    bench.StepDone();
  }
  bench.ctx->Synchronize();
  ThroughputTracker tracker(options.batch_size, /*warmup_steps=*/0);
  for (int64_t s = 0; s < options.steps; ++s) {
    const auto t0 = Clock::now();
    const float loss = bench.TrainStep();
    bench.ctx->Synchronize();  // on a GPU, backward is still queued when the loss is back
    const double seconds = std::max(SecondsSince(t0), 1e-9);
    if (!std::isfinite(loss)) return absl::InternalError(absl::StrCat("loss is ", loss, " in step ", s));
    bench.StepDone();
    tracker.RecordStep(s, seconds);
    result.step_seconds.push_back(seconds);
    result.losses.push_back(loss);
    if (options.progress != nullptr) *options.progress << tracker.ProgressLine(s, loss) << std::endl;
  }
  result.images_per_sec = tracker.mean_images_per_sec();
  result.images_per_sec_stddev = tracker.stddev();
  result.achieved_gflops = result.images_per_sec * result.gflop_per_image;
  if (options.progress != nullptr) {
    *options.progress << "----------------------------------------------------------------\n"
                      << absl::StrFormat("total images/sec: %.2f\n", result.images_per_sec)
                      << "----------------------------------------------------------------" << std::endl;
  }
  return absl::OkStatus();
}

// The training's memory: peak RSS, the step's memory plan, the device's
// peak bytes and the cudaMalloc calls after the first step.
void RecordMemory(const BenchModel& bench, ModelBenchResult& result) {
  result.peak_rss_bytes = PeakRssBytes();
  result.step_memory = bench.model->LastStepMemory(/*training=*/true);
  const DeviceContext::MemoryStats device_memory = bench.ctx->memory_stats();
  result.peak_device_bytes = device_memory.peak_bytes_in_use;
  result.device_allocations_after_first_step = device_memory.backend_allocations - bench.allocations_after_first_step;
}

// The roofline from both halves: the better half's best repetition, the
// mean over all repetitions (total FLOPs / total seconds).
MatmulReference CombineHalves(const MatmulReference& before, const MatmulReference& after) {
  MatmulReference combined = after.gflops >= before.gflops ? after : before;
  combined.reps = before.reps + after.reps;
  const double seconds = before.reps / before.mean_gflops + after.reps / after.mean_gflops;
  combined.mean_gflops = (before.reps + after.reps) / seconds;
  return combined;
}

// The achieved figures against the roofline: the mean's and the fastest
// step's ratios; with bf16 on the CPU also against oneDNN's bf16 matmul.
void CompareWithRoofline(const ModelBenchOptions& options, const MatmulReference& matmul, ModelBenchResult& result) {
  result.matmul = matmul;
  result.ratio = result.matmul.gflops > 0 ? result.achieved_gflops / result.matmul.gflops : 0;
  const double best_step = *std::min_element(result.step_seconds.begin(), result.step_seconds.end());
  result.best_images_per_sec = options.batch_size / best_step;
  result.best_achieved_gflops = result.best_images_per_sec * result.gflop_per_image;
  result.best_ratio = result.matmul.gflops > 0 ? result.best_achieved_gflops / result.matmul.gflops : 0;
  if (options.device != "gpu" && options.precision == "bf16") {
    const int64_t mm = options.matmul_size;
    result.bf16_matmul = MeasureBf16Matmul(mm, mm, mm, options.matmul_reps);
    result.bf16_ratio = result.achieved_gflops / result.bf16_matmul.gflops;
    result.best_bf16_ratio = result.best_achieved_gflops / result.bf16_matmul.gflops;
  }
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
  if (absl::Status s = ParseFp32Math(o.fp32_math).status(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--fp32_math: ", s.message()));
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
  ModelBenchResult result = DescribeRun(options);

  // 0. The roofline, first half: measured before the model exists (and again
  // after the steps; the best counts), so a moment of load from other
  // processes on a shared machine does not flatter the ratio.
  const int reps_before = std::max(1, options.matmul_reps / 2);
  PSTRAIN_ASSIGN_OR_RETURN(const MatmulReference before, MeasureSgemm(options, reps_before));

  // 1. The model and its one synthetic batch.
  PSTRAIN_ASSIGN_OR_RETURN(BenchModel bench, BuildModel(options, result));
  MakeSyntheticBatch(options, result.input_shape, bench);
  if (options.progress != nullptr) PrintBanner(result, *options.progress);

  // 2. Warm-up, then measured steps.
  PSTRAIN_RETURN_IF_ERROR(RunSteps(options, bench, result));

  // 3. Profile (optional): more steps with oneDNN verbose on.
  if (options.profile) {
    PSTRAIN_ASSIGN_OR_RETURN(const OnednnProfile profile,
                             ProfileOnednnSteps(options.profile_steps, [&] { bench.TrainStep(); }));
    result.profile = profile.rows;
    result.profile_step_ms = profile.step_ms;
    result.profile_dnnl_ms = profile.dnnl_ms;
  }

  // 4. Peak memory of the training, then the roofline beside it.
  RecordMemory(bench, result);
  if (options.device == "gpu") bench.Release();  // the GPU reference gets the device (and its memory) to itself
  PSTRAIN_ASSIGN_OR_RETURN(const MatmulReference after,
                           MeasureSgemm(options, std::max(1, options.matmul_reps - reps_before)));
  CompareWithRoofline(options, CombineHalves(before, after), result);
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
      "{\"model\":%s,\"device\":%s,\"precision\":%s,\"fp32_math\":%s,\"activations\":%s,\"matmul_reference\":%s,"
      "\"batch_size\":%d,"
      "\"steps\":%d,\"warmup\":%"
      "d,\"input_"
      "shape\":[%s],\"num_classes\":%d,"
      "\"threads\":%d,\"num_parameters\":%d,\"images_per_sec\":%s,\"images_per_sec_stddev\":%s,"
      "\"forward_gflop_per_image\":%s,\"gflop_per_image\":%s,\"achieved_gflops\":%s,\"matmul_gflops\":%s,"
      "\"matmul_size\":%d,\"ratio\":%s,\"best_images_per_sec\":%s,\"best_achieved_gflops\":%s,"
      "\"best_ratio\":%s,\"peak_rss_bytes\":%d,\"step_arena_bytes\":%d,\"step_separate_bytes\":%d,"
      "\"step_live_peak_bytes\":%d,\"peak_device_bytes\":%d,\"device_allocations_after_first_step\":%d,"
      "\"setup_seconds\":%s",
      JsonString(r.model), JsonString(r.device), JsonString(r.precision), JsonString(r.fp32_math),
      JsonString(r.activations), JsonString(r.matmul_name), r.batch_size, r.steps, r.warmup,
      absl::StrJoin(r.input_shape, ","), r.num_classes, r.threads, r.num_parameters, JsonNumber(r.images_per_sec),
      JsonNumber(r.images_per_sec_stddev), JsonNumber(r.forward_gflop_per_image), JsonNumber(r.gflop_per_image),
      JsonNumber(r.achieved_gflops), JsonNumber(r.matmul.gflops), r.matmul.m, JsonNumber(r.ratio),
      JsonNumber(r.best_images_per_sec), JsonNumber(r.best_achieved_gflops), JsonNumber(r.best_ratio), r.peak_rss_bytes,
      r.step_memory.arena_bytes, r.step_memory.separate_bytes, r.step_memory.live_peak_bytes, r.peak_device_bytes,
      r.device_allocations_after_first_step, JsonNumber(r.setup_seconds));
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
