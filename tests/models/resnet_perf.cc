// Not a test: a performance probe for the oneDNN layer library. Times a
// training step (forward + backward through the Model API) of a ResNet
// bottleneck block or a whole ResNet-50 and, in the same run, a oneDNN f32
// matmul of 2048^3, and reports both in GFLOP/s (training FLOPs = 3 x
// forward, multiply-add = 2). Run with OMP_NUM_THREADS set to the cores.
//
//   models_resnet_perf [--model=bottleneck|resnet50|zoo:NAME] [--batch=32] [--steps=5] [--hw=56]
//
// bottleneck: input [64, hw, hw] -> stem conv1x1 256 + bn + relu (so the
// block reads a blocked activation, as inside the network) -> the block
// 256 -> 64 (1x1) -> 64 (3x3) -> 256 (1x1), each + bn, + identity skip,
// relu -> global_avg_pool -> dense 10.
// resnet50: He et al. 2015 ResNet-50 v1.5 (stride on the 3x3), [3, hw, hw]
// input (--hw default 224), 1000 classes; 8.2 GFLOP (4.1 G multiply-adds)
// forward per image.
// zoo:NAME: the zoo's model NAME (CreateModel) at [3, hw, hw] (default 224),
// 1000 classes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "device/cpu/dnnl_util.h"
#include "models/model.h"

namespace pstrain {
namespace {

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Process CPU seconds (all threads).
double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Timing {
  double wall = 0, cpu = 0;
};

template <typename F>
Timing Time(F f) {
  const double cpu = CpuSeconds();
  auto start = std::chrono::steady_clock::now();
  f();
  return {Seconds(start), CpuSeconds() - cpu};
}

// A oneDNN f32 matmul n x n x n, ready to run.
class Matmul {
 public:
  Matmul(DeviceContext& dctx, int64_t n) : ctx_(cpu::AsCpu(dctx)), n_(n), a_({n, n}), b_({n, n}), c_({n, n}) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : a_.span()) v = dist(rng);
    for (float& v : b_.span()) v = dist(rng);
    d_ = cpu::PlainDesc({n, n});
    prim_ = cpu::MakePrim(
        dnnl::matmul::primitive_desc(dnnl::matmul::desc(d_, d_, d_), cpu::ScratchpadAttr(), ctx_.engine()),
        cpu::Work::kCompute);
  }
  double flops() const { return 2.0 * n_ * n_ * n_; }
  void Run() {
    cpu::Run(ctx_, prim_,
             {{DNNL_ARG_SRC, cpu::View(d_, ctx_, a_)},
              {DNNL_ARG_WEIGHTS, cpu::View(d_, ctx_, b_)},
              {DNNL_ARG_DST, cpu::View(d_, ctx_, c_)}});
  }

 private:
  cpu::CpuContext& ctx_;
  const int64_t n_;
  Tensor a_, b_, c_;
  dnnl::memory::desc d_;
  cpu::Prim prim_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

LayerSpec Conv(int64_t filters, int64_t k, int64_t stride, int64_t pad) {
  return LayerSpec{"conv2d"}
      .Int("filters", filters)
      .Ints("kernel", {k, k})
      .Ints("stride", {stride, stride})
      .Ints("padding", {pad, pad})
      .Int("bias", 0);
}

int ConvBn(ModelBuilder& b, const std::string& name, int input, const LayerSpec& conv, bool relu) {
  int n = b.Add(name + "/conv", conv, {input});
  n = b.Add(name + "/bn", LayerSpec{"batch_norm"}, {n});
  return relu ? b.Add(name + "/relu", LayerSpec{"relu"}, {n}) : n;
}

// A bottleneck block: 1x1 `width`, 3x3 `width` (stride), 1x1 4*width, + skip.
int Bottleneck(ModelBuilder& b, const std::string& name, int input, int64_t width, int64_t stride, bool project) {
  int n = ConvBn(b, name + "/a", input, Conv(width, 1, 1, 0), true);
  n = ConvBn(b, name + "/b", n, Conv(width, 3, stride, 1), true);
  n = ConvBn(b, name + "/c", n, Conv(4 * width, 1, 1, 0), false);
  int skip = project ? ConvBn(b, name + "/proj", input, Conv(4 * width, 1, stride, 0), false) : input;
  n = b.Add(name + "/add", LayerSpec{"add"}, {n, skip});
  return b.Add(name + "/relu", LayerSpec{"relu"}, {n});
}

absl::StatusOr<std::unique_ptr<Model>> BuildBottleneck(DeviceContext* ctx, int64_t hw) {
  ModelBuilder b("bottleneck", {64, hw, hw}, 10, ctx);
  int n = ConvBn(b, "stem", ModelBuilder::kInput, Conv(256, 1, 1, 0), true);
  n = Bottleneck(b, "block", n, 64, 1, false);
  b.Add("pool", LayerSpec{"global_avg_pool"}, {n});
  return b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 10)));
}

absl::StatusOr<std::unique_ptr<Model>> BuildResnet50(DeviceContext* ctx, int64_t hw) {
  ModelBuilder b("resnet50", {3, hw, hw}, 1000, ctx);
  int n = ConvBn(b, "conv1", ModelBuilder::kInput, Conv(64, 7, 2, 3), true);
  n = b.Add("pool1", LayerSpec{"max_pool"}.Int("kernel", 3).Int("stride", 2).Int("padding", 1), {n});
  const int64_t widths[] = {64, 128, 256, 512};
  const int blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s) {
    for (int i = 0; i < blocks[s]; ++i) {
      n = Bottleneck(b, absl::StrCat("stage", s + 2, "/block", i + 1), n, widths[s], i == 0 && s > 0 ? 2 : 1, i == 0);
    }
  }
  b.Add("pool5", LayerSpec{"global_avg_pool"}, {n});
  return b.Finish(b.Then("logits", LayerSpec{"dense"}.Int("units", 1000)));
}

int Main(int argc, char** argv) {
  std::string model_name = "bottleneck";
  int64_t batch = 32, steps = 5, hw = -1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      return arg.rfind(flag, 0) == 0 ? arg.c_str() + std::strlen(flag) : nullptr;
    };
    if (const char* v = value("--model="))
      model_name = v;
    else if (const char* v = value("--batch="))
      batch = std::atoll(v);
    else if (const char* v = value("--steps="))
      steps = std::atoll(v);
    else if (const char* v = value("--hw="))
      hw = std::atoll(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (hw < 0) hw = model_name == "bottleneck" ? 56 : 224;
  auto ctx = CreateDeviceContext(Device::Cpu());
  if (!ctx.ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Model>> model;
  if (model_name.rfind("zoo:", 0) == 0) {
    ModelConfig config;
    config.set_name(model_name.substr(4));
    for (int64_t d : {int64_t{3}, hw, hw}) config.add_input_shape(static_cast<int>(d));
    config.set_num_classes(1000);
    model = CreateModel(config, ctx->get());
  } else if (model_name == "resnet50") {
    model = BuildResnet50(ctx->get(), hw);
  } else if (model_name == "bottleneck") {
    model = BuildBottleneck(ctx->get(), hw);
  } else {
    std::fprintf(stderr, "unknown --model=%s\n", model_name.c_str());
    return 2;
  }
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  Model& m = **model;
  m.InitializeVariables(1);
  Shape shape = {batch};
  shape.insert(shape.end(), m.input_shape().begin(), m.input_shape().end());
  Tensor images(shape);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : images.span()) v = dist(rng);
  std::vector<int32_t> labels(batch);
  for (int32_t& l : labels) l = static_cast<int32_t>(rng() % m.num_classes());

  // Steps and matmuls interleaved, so both see the same machine (it may be
  // shared): per-pair ratios, plus best against best.
  Matmul matmul(**ctx, 2048);
  matmul.Run();
  const Timing first = Time([&] { m.TrainStep(images, labels.data(), nullptr); });  // creates primitives, allocates
  const double train_flops = 3.0 * static_cast<double>(m.ForwardFlopsPerExample()) * batch;
  std::vector<double> step_wall, step_cpu, mm_wall, mm_cpu, ratio_wall, ratio_cpu;
  for (int64_t s = 0; s < steps; ++s) {
    const Timing mm = Time([&] { matmul.Run(); });
    const Timing step = Time([&] { m.TrainStep(images, labels.data(), nullptr); });
    step_wall.push_back(train_flops / step.wall / 1e9);
    step_cpu.push_back(train_flops / step.cpu / 1e9);
    mm_wall.push_back(matmul.flops() / mm.wall / 1e9);
    mm_cpu.push_back(matmul.flops() / mm.cpu / 1e9);
    ratio_wall.push_back(step_wall.back() / mm_wall.back());
    ratio_cpu.push_back(step_cpu.back() / mm_cpu.back());
  }
  auto best = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  std::printf("model %s batch %lld input %s: forward %.3f GFLOP/example, training step %.2f GFLOP (3 x forward)\n",
              model_name.c_str(), static_cast<long long>(batch), ShapeToString(m.input_shape()).c_str(),
              m.ForwardFlopsPerExample() / 1e9, train_flops / 1e9);
  std::printf("first step %.2f s (primitive creation, allocation)\n", first.wall);
  std::printf("training step  GFLOP/s: median %.1f, best %.1f  (per CPU-second: median %.1f)\n", Median(step_wall),
              best(step_wall), Median(step_cpu));
  std::printf("matmul 2048^3  GFLOP/s: median %.1f, best %.1f  (per CPU-second: median %.1f)\n", Median(mm_wall),
              best(mm_wall), Median(mm_cpu));
  std::printf("training / matmul: median of pairs %.0f%%, best vs best %.0f%%, per CPU-second %.0f%%\n",
              100 * Median(ratio_wall), 100 * best(step_wall) / best(mm_wall), 100 * Median(ratio_cpu));
  return 0;
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) { return pstrain::Main(argc, argv); }
