// The single-process model benchmark behind `pstrain-bench model`.
//
// Builds a zoo model on the CPU (or GPU 0 with device "gpu"), initialises it, and runs `warmup` + `steps`
// training steps (Model::TrainStep: forward, loss, backward; no optimizer,
// no PS) on one fixed synthetic batch (images uniform in [-1, 1], uniform
// labels). Per measured step it records the time and images/sec, as
// tf_cnn_benchmarks does (ThroughputTracker). Figures:
//
//   forward FLOPs/image  Model::ForwardFlopsPerExample() (multiply-add = 2)
//   training FLOPs/image 3 x forward (backward-data + backward-weights cost
//                        about twice the forward, the usual convention)
//   achieved GFLOP/s     images/sec x training FLOPs/image / 1e9
//   matmul GFLOP/s       oneDNN sgemm on m = n = k = matmul_size, best of
//                        matmul_reps repetitions (half before building the
//                        model, half after the training steps), same process
//                        and thread count: the roofline
//   ratio                achieved / matmul
//   best_*               the same from the fastest measured step
//   peak RSS             getrusage ru_maxrss, read before the matmul runs
//   bf16 matmul          precision bf16: oneDNN's bf16 x bf16 -> f32 matmul,
//                        the roofline of mixed precision's products
//   step memory          the model's memory plan for a training step: its
//                        arena, what separate buffers would take, the live
//                        peak (Model::LastStepMemory)
//   peak device memory   GPU: the caching allocator's most bytes in use, and
//                        its cudaMalloc calls after the first step
//
// With `profile`, `profile_steps` more steps run with oneDNN's verbose mode
// on (its output captured from stdout, so nothing else may write to stdout
// meanwhile), and every primitive execution is attributed to a layer type
// (convolution -> conv2d, pooling -> max_pool/avg_pool/global_avg_pool,
// inner_product -> dense, ...) and a phase: forward (before the loss's
// softmax) or backward (after it). Convolutions and inner products are split
// by pass (forward, backward_data, backward_weights) with their GFLOP/s.
// Wall time not spent in oneDNN primitives is reported as "outside oneDNN".
// The attribution is onednn_profile.h's.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/tensor.h"
#include "models/model.h"
#include "tools/bench/matmul_reference.h"
#include "tools/bench/onednn_profile.h"

namespace pstrain::bench {

struct ModelBenchOptions {
  std::string model = "resnet50";
  // "cpu" (oneDNN; reference: oneDNN sgemm) or "gpu" (GPU 0, CUDA layers;
  // reference: cuBLAS sgemm, gpu_matmul_reference.h; no profile).
  std::string device = "cpu";
  // The compute-bound layers' arithmetic (DeviceContext::SetPrecision):
  // "fp32" or "bf16" (CPUs with AVX-512 BF16 or AMX). The matmul reference
  // stays fp32 sgemm, so a bf16 ratio compares against fp32's roofline.
  std::string precision = "fp32";
  // How float32 products run on a GPU with TF32 (DeviceContext::SetFp32Math):
  // "tf32_convolutions" (PyTorch's default), "tf32" or "strict"; CPUs are
  // always strict. The matmul reference stays strict sgemm.
  std::string fp32_math = "tf32_convolutions";
  int batch_size = 32;         // > 0
  int64_t steps = 10;          // measured steps, > 0
  int64_t warmup = 2;          // untimed steps first, >= 0
  Shape input_shape;           // [C, H, W]; empty: DefaultInputShape(model)
  int num_classes = 1000;      // > 1
  uint64_t seed = 1;           // variables and synthetic batch
  int64_t matmul_size = 2048;  // > 0
  int matmul_reps = 10;        // > 0; half run before the model is built, half after
  bool profile = false;
  int64_t profile_steps = 2;  // > 0 when profile
  // Receives the banner and one tf_cnn_benchmarks progress line per measured
  // step as they happen; null: nothing printed while running.
  std::ostream* progress = nullptr;
};

struct ModelBenchResult {
  std::string model;
  Shape input_shape;
  int num_classes = 0;
  int batch_size = 0;
  int64_t steps = 0;
  int64_t warmup = 0;
  int threads = 0;  // oneDNN's OpenMP threads
  int64_t num_parameters = 0;
  double setup_seconds = 0;          // create + initialise the model
  std::vector<double> step_seconds;  // measured steps
  std::vector<float> losses;         // measured steps
  double images_per_sec = 0;         // mean of per-step images/sec (tf_cnn_benchmarks)
  double images_per_sec_stddev = 0;
  double forward_gflop_per_image = 0;
  double gflop_per_image = 0;  // training: 3 x forward
  double achieved_gflops = 0;
  std::string device;     // "cpu" or "gpu"
  std::string precision;  // "fp32" or "bf16"
  std::string fp32_math;  // as it ran on the device (strict where it has no TF32)
  // How activations passed between layers: "float32", or on a GPU in bf16
  // or fp16 with PSTRAIN_CUDA_ACTIVATIONS=half, "bf16 nhwc" / "fp16 nhwc".
  std::string activations = "float32";
  std::string matmul_name;  // "oneDNN sgemm" or "cuBLAS sgemm"
  MatmulReference matmul;
  double ratio = 0;  // achieved_gflops / matmul.gflops
  // Precision bf16 on the CPU: oneDNN's bf16 matmul of the same size, after
  // the steps, and the ratios against it (the mean's and the fastest
  // step's); zero otherwise.
  MatmulReference bf16_matmul;
  double bf16_ratio = 0;
  double best_bf16_ratio = 0;
  // The fastest measured step, like-for-like with the matmul's best-of (on a
  // shared machine the mean carries other processes' load).
  double best_images_per_sec = 0;
  double best_achieved_gflops = 0;
  double best_ratio = 0;
  int64_t peak_rss_bytes = 0;
  // The training step's activations, gradients and scratch as the model's
  // memory plan placed them (Model::LastStepMemory).
  StepMemory step_memory;
  // GPU: the most device bytes in use at once, and the blocks the caching
  // allocator took from cudaMalloc after the first step (0 when every later
  // step reused what the first one allocated). Zero on the CPU.
  int64_t peak_device_bytes = 0;
  int64_t device_allocations_after_first_step = 0;
  // Profile (when asked for).
  std::vector<ProfileRow> profile;  // by ms_per_step, largest first
  double profile_step_ms = 0;       // wall time per profiled step
  double profile_dnnl_ms = 0;       // inside oneDNN primitives per profiled step
};

// [3, 299, 299] for inception3; [1, 28, 28] for lenet, mlp and trivial;
// [3, 224, 224] otherwise.
Shape DefaultInputShape(const std::string& model);

// InvalidArgument naming the bad option.
absl::Status ValidateModelBenchOptions(const ModelBenchOptions& options);

// Runs the benchmark. InvalidArgument for bad options or a model that does
// not build (unknown name, input too small, ...).
absl::StatusOr<ModelBenchResult> RunModelBench(const ModelBenchOptions& options);

// The summary after the progress lines (several lines, newline-terminated).
std::string FormatModelBenchSummary(const ModelBenchResult& result);
// The profile table (several lines, newline-terminated); "" without one.
std::string FormatModelBenchProfile(const ModelBenchResult& result);
// One JSON object on one line (no newline): model, device, precision, batch_size, steps, warmup,
// input_shape, num_classes, threads, num_parameters, images_per_sec,
// images_per_sec_stddev, forward_gflop_per_image, gflop_per_image,
// achieved_gflops, matmul_gflops, matmul_size, ratio, best_images_per_sec,
// best_achieved_gflops, best_ratio, peak_rss_bytes, step_arena_bytes,
// step_separate_bytes, step_live_peak_bytes, peak_device_bytes,
// device_allocations_after_first_step, setup_seconds, and
// bf16_matmul_gflops, bf16_ratio and best_bf16_ratio when measured, and
// "profile" (array of rows) when profiled. Non-finite figures are null.
std::string FormatModelBenchJson(const ModelBenchResult& result);

}  // namespace pstrain::bench
