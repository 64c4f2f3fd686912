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
