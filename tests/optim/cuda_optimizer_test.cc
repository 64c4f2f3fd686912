// The CUDA optimizers (optim/cuda/) compute the CPU optimizers' update
// element for element. Skips without a GPU (and in builds without CUDA).
#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "optim/optimizer.h"
#ifdef PSTRAIN_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace pstrain {
namespace {

#ifdef PSTRAIN_WITH_CUDA
class CudaOptimizerTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no usable CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  float* Upload(const std::vector<float>& host) {
    float* device = nullptr;
    EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    buffers_.emplace_back(device, cudaFree);
    return device;
  }
  std::vector<float> Download(const float* device, size_t n) {
    std::vector<float> host(n);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  cudaStream_t stream_ = nullptr;
  std::vector<std::unique_ptr<float, cudaError_t (*)(void*)>> buffers_;
};

TEST_P(CudaOptimizerTest, MatchesTheCpuOptimizerElementForElement) {
  OptimizerConfig config;
  config.set_name(GetParam());
  config.set_momentum(0.9f);
  config.set_weight_decay(1e-4f);
  absl::StatusOr<std::unique_ptr<Optimizer>> cpu = CreateOptimizer(config, DeviceKind::kCpu);
  absl::StatusOr<std::unique_ptr<Optimizer>> gpu = CreateOptimizer(config, DeviceKind::kCuda, stream_);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_EQ((*cpu)->num_slots(), (*gpu)->num_slots());
  const int n = 100003;  // more than one grid-stride pass
  std::vector<float> w(n), g(n);
  for (int i = 0; i < n; ++i) {
    w[i] = std::sin(0.01f * i);
    g[i] = std::cos(0.37f * i);
  }
  std::vector<std::vector<float>> cpu_slots((*cpu)->num_slots(), std::vector<float>(n, 0.0f));
  float* gw = Upload(w);
  float* gg = Upload(g);
  std::vector<float*> gpu_slots;
  for (int s = 0; s < (*gpu)->num_slots(); ++s) gpu_slots.push_back(Upload(std::vector<float>(n, 0.0f)));
  for (int step = 0; step < 3; ++step) {  // slots carry state across steps
    std::vector<float*> slots;
    for (auto& slot : cpu_slots) slots.push_back(slot.data());
    const OptimizerStep update{.learning_rate = 0.05f, .gradient_scale = step == 1 ? 0.25f : 1.0f};
    (*cpu)->Apply(w.data(), g.data(), n, update, slots.data(), w.data());
    (*gpu)->Apply(gw, gg, n, update, gpu_slots.data(), gw);
  }
  const std::vector<float> from_gpu = Download(gw, n);
  for (int i = 0; i < n; ++i) ASSERT_NEAR(from_gpu[i], w[i], 1e-6f * (1.0f + std::fabs(w[i]))) << i;
}

// One launch for many variables (ApplyAll over a chunk table) gives, bit for
// bit, what one launch per variable (Apply) gives, across steps and with a
// variable that spans several chunks, one that ends a chunk exactly, one of
// a single element and an empty one.
TEST_P(CudaOptimizerTest, ApplyAllEqualsApplyOnEachVariable) {
  OptimizerConfig config;
  config.set_name(GetParam());
  config.set_momentum(0.9f);
  config.set_weight_decay(1e-4f);
  absl::StatusOr<std::unique_ptr<Optimizer>> gpu = CreateOptimizer(config, DeviceKind::kCuda, stream_);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const std::vector<int64_t> lengths = {150001, 65536, 1, 0, 777};
  struct DeviceVariable {
    float* w;
    float* g;
    std::vector<float*> slots;
  };
  auto make = [&] {
    std::vector<DeviceVariable> vars;
    for (int64_t n : lengths) {
      std::vector<float> w(n), g(n);
      for (int64_t i = 0; i < n; ++i) {
        w[i] = std::sin(0.01f * i + n);
        g[i] = std::cos(0.37f * i);
      }
      DeviceVariable v{n > 0 ? Upload(w) : nullptr, n > 0 ? Upload(g) : nullptr, {}};
      for (int s = 0; s < (*gpu)->num_slots(); ++s) v.slots.push_back(n > 0 ? Upload(std::vector<float>(n)) : nullptr);
      vars.push_back(v);
    }
    return vars;
  };
  std::vector<DeviceVariable> each = make(), all = make();
  for (int step = 0; step < 3; ++step) {
    const OptimizerStep update{.learning_rate = 0.05f, .gradient_scale = step == 1 ? 0.25f : 1.0f};
    std::vector<VariableUpdate> updates;
    for (size_t v = 0; v < lengths.size(); ++v) {
      (*gpu)->Apply(each[v].w, each[v].g, lengths[v], update, each[v].slots.data(), each[v].w);
      updates.push_back({all[v].w, all[v].g, lengths[v], all[v].slots.data()});
    }
    (*gpu)->ApplyAll(updates, update);
  }
  for (size_t v = 0; v < lengths.size(); ++v) {
    if (lengths[v] == 0) continue;
    EXPECT_EQ(Download(all[v].w, lengths[v]), Download(each[v].w, lengths[v])) << "variable " << v;
    for (size_t s = 0; s < all[v].slots.size(); ++s) {
      EXPECT_EQ(Download(all[v].slots[s], lengths[v]), Download(each[v].slots[s], lengths[v])) << "variable " << v;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, CudaOptimizerTest, ::testing::Values("sgd", "momentum"));
#endif

TEST(CudaOptimizerRegistryTest, EveryGpuOptimizerHasACpuTwin) {
  for (const std::string& name : OptimizerRegistry(DeviceKind::kCuda).Names()) {
    EXPECT_TRUE(OptimizerRegistry(DeviceKind::kCpu).Contains(name)) << name;
  }
#ifdef PSTRAIN_WITH_CUDA
  // A CUDA twin is optional (optim/optimizer.h); these two have one.
  for (const char* name : {"sgd", "momentum"}) {
    EXPECT_TRUE(OptimizerRegistry(DeviceKind::kCuda).Contains(name)) << name;
  }
#endif
}

}  // namespace
}  // namespace pstrain
