// GPU workers train exactly like the CPU: every synchronous GPU strategy over
// R ranks with batch b reaches, after k steps, the parameters of one CPU
// device with batch R*b on the same examples (the batcher gives rank r the
// r-th slice of each global batch).
//
// Needs GPUs: the PS (host mirror) case needs one; the NCCL cases need one
// GPU per rank (NCCL refuses two ranks on one GPU). Without them the tests
// skip with the reason. What runs everywhere: a GPU experiment on a machine
// without a usable GPU fails with an error naming the device, not a crash.
#include <cmath>
#include <string>

#include "gtest/gtest.h"
#include "models/layers/layer.h"
#include "tests/worker/equivalence_util.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {
namespace {

int UsableGpus() { return CountDevices(DeviceKind::kCuda); }

// Strict fp32 (kTolerance below); TF32 has a test of its own
// (Tf32TrainsLikeFp32).
ExperimentConfig BaseConfig() {
  ExperimentConfig config = EquivalenceConfig("gpu_equivalence");
  config.mutable_timeouts()->set_startup_seconds(60);
  config.set_fp32_math(ExperimentConfig::strict);
  return config;
}

// One CPU device with the whole global batch.
std::vector<std::vector<float>> CpuReference(int global_batch) {
  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), global_batch);
  EXPECT_TRUE(single.ok()) << single.status();
  return single.ok() ? single->final_params : std::vector<std::vector<float>>{};
}

// GPU and CPU sum in different orders: fp32 agreement, not bitwise
// (strict fp32 on the GPU).
constexpr double kTolerance = 1e-4;
// TF32 products round their operands to 10 mantissa bits (2^-11
// relative): after a few steps the parameters stay within 1e-2, the bound
// mixed precision meets with bf16's 7 bits.
constexpr double kTf32Tolerance = 1e-2;

struct GpuCase {
  const char* name;
  const char* variable_update;
  const char* all_reduce_spec;
  const char* local_parameter_device;
  int workers;
  int devices;
  int num_ps;
  int gpus_needed;
};
void PrintTo(const GpuCase& c, std::ostream* os) { *os << c.name; }

class GpuEquivalenceTest : public ::testing::TestWithParam<GpuCase> {};

TEST_P(GpuEquivalenceTest, MatchesOneCpuDeviceWithTheWholeBatch) {
  const GpuCase& c = GetParam();
  const int gpus = UsableGpus();
  if (gpus < c.gpus_needed) {
    GTEST_SKIP() << c.name << " needs " << c.gpus_needed << " GPU(s); this machine has " << gpus
                 << " usable (no GPU, or a build without CUDA)";
  }
  const int kBatch = 8;
  ExperimentConfig config = BaseConfig();
  config.set_device("gpu");
  config.set_variable_update(c.variable_update);
  config.set_all_reduce_spec(c.all_reduce_spec);
  config.set_local_parameter_device(c.local_parameter_device);
  config.set_devices_per_worker(c.devices);
  if (c.num_ps > 0) {
    SetInProcessHosts(&config, c.num_ps, c.workers);
  } else {  // no PS: the chief's rendezvous store on loopback
    SetInProcessHosts(&config, 1, c.workers);
    config.mutable_cluster()->clear_ps_hosts();
    config.mutable_cluster()->clear_worker_hosts();
    for (int w = 0; w < c.workers; ++w) {
      config.mutable_cluster()->add_worker_hosts("127.0.0.1:" + std::to_string(42000 + w));
    }
  }
  config.mutable_train()->set_batch_size_per_device(kBatch);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->chief.global_batch_size(), kBatch * c.workers * c.devices);
  const std::vector<std::vector<float>> reference = CpuReference(kBatch * c.workers * c.devices);
  ASSERT_FALSE(reference.empty());
  EXPECT_LT(MaxRelativeDifference(run->final_params, reference), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Strategies, GpuEquivalenceTest,
                         ::testing::Values(
                             // Host mirrors: two workers may share one GPU.
                             GpuCase{"ps_2workers_host_mirrors", "parameter_server", "", "cpu", 2, 1, 2, 1},
                             GpuCase{"replicated_pscpu_2replicas", "replicated", "pscpu", "cpu", 1, 2, 0, 1},
                             // Variables and optimizer on the device, no synchronisation.
                             GpuCase{"independent_on_device_1replica", "independent", "", "cpu", 1, 1, 0, 1},
                             // Gradients summed on their owner GPU (replicas may share one GPU).
                             GpuCase{"ps_local_parameter_device_gpu_3replicas", "parameter_server", "", "gpu", 2, 3, 2,
                                     1},
                             // NCCL: one GPU per rank.
                             GpuCase{"replicated_nccl_2gpus", "replicated", "nccl", "cpu", 1, 2, 0, 2},
                             GpuCase{"allreduce_nccl_2workers", "allreduce", "", "cpu", 2, 1, 0, 2},
                             GpuCase{"allreduce_nccl_2workers_2gpus", "allreduce", "", "cpu", 2, 2, 0, 4}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- Mixed precision and loss scaling on the device (NCCL strategies) ----

// replicated over NCCL on one GPU (one rank): the gradients stay on the
// device, where the strategy unscales them and checks for overflow.
ExperimentConfig NcclOnOneGpu(int batch) {
  ExperimentConfig config = BaseConfig();
  config.set_device("gpu");
  config.set_variable_update("replicated");
  config.set_all_reduce_spec("nccl");
  config.set_devices_per_worker(1);
  SetInProcessHosts(&config, 1, 1);  // no PS: the chief's rendezvous store on loopback
  config.mutable_cluster()->clear_ps_hosts();
  config.mutable_cluster()->clear_worker_hosts();
  config.mutable_cluster()->add_worker_hosts("127.0.0.1:42010");
  config.mutable_train()->set_batch_size_per_device(batch);
  return config;
}

class GpuLossScalingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (UsableGpus() < 1) GTEST_SKIP() << "needs a GPU; this machine has none usable (or a build without CUDA)";
  }
};

// A power-of-two scale is exact in float32: scaled, unscaled on the device,
// the run reaches the CPU's parameters. Were the gradients not unscaled, the
// updates would be 1024 times too large.
TEST_F(GpuLossScalingTest, APowerOfTwoScaleTrainsLikeNoScaling) {
  ExperimentConfig config = NcclOnOneGpu(8);
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::static_);
  config.mutable_loss_scaling()->set_initial_scale(1024);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->chief.workers_size(), 1);
  EXPECT_EQ(run->chief.workers(0).overflow_steps(), 0);
  EXPECT_EQ(run->chief.workers(0).loss_scale(), 1024.0);
  EXPECT_LT(MaxRelativeDifference(run->final_params, CpuReference(8)), kTolerance);
}

// fp16 products overflow under a scale of 2^40 (the loss gradient alone
// exceeds 65504): those steps are skipped and the dynamic scale backs off
// (x 2^-10 per overflow) until the gradients fit.
TEST_F(GpuLossScalingTest, OverflowedStepsAreSkippedAndTheScaleBacksOff) {
  ExperimentConfig config = NcclOnOneGpu(8);
  config.set_precision(ExperimentConfig::fp16);
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
  config.mutable_loss_scaling()->set_initial_scale(0x1p40f);
  config.mutable_loss_scaling()->set_backoff_factor(0x1p-10f);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->chief.workers_size(), 1);
  const WorkerReport& w = run->chief.workers(0);
  EXPECT_GE(w.overflow_steps(), 1);
  EXPECT_LT(w.overflow_steps(), config.train().steps()) << "the scale never came down far enough";
  EXPECT_LT(w.loss_scale(), 0x1p40f);
  for (const std::vector<float>& v : run->final_params) {
    for (float x : v) ASSERT_TRUE(std::isfinite(x)) << "an overflowed step reached the variables";
  }
}

// TF32 products (fp32_math tf32: the MLP's dense layers; tf32_convolutions
// would leave them strict) train like strict fp32 within TF32's rounding.
// (cuBLAS may keep products this small off the tensor cores; that TF32
// really rounds is cuda_cpu_agreement_test's Tf32RoundsTheProductsOperands.)
TEST_F(GpuLossScalingTest, Tf32TrainsLikeFp32) {
  ExperimentConfig config = NcclOnOneGpu(8);
  config.set_fp32_math(ExperimentConfig::tf32);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->chief.fp32_math(), "tf32");
  const double difference = MaxRelativeDifference(run->final_params, CpuReference(8));
  EXPECT_LT(difference, kTf32Tolerance);
}

// Mixed precision trains like fp32: conv2d/dense products in 16 bits,
// everything else fp32 (fp16 with a loss scale, bf16 without).
TEST_F(GpuLossScalingTest, MixedPrecisionTrainsLikeFp32) {
  for (const char* precision : {"bf16", "fp16"}) {
    SCOPED_TRACE(precision);
    ExperimentConfig config = NcclOnOneGpu(8);
    ExperimentConfig::Precision proto_precision;
    ASSERT_TRUE(ExperimentConfig::Precision_Parse(precision, &proto_precision));
    config.set_precision(proto_precision);
    if (std::string(precision) == "fp16") {
      config.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
      config.mutable_loss_scaling()->set_initial_scale(1024);
    }
    absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
    ASSERT_TRUE(run.ok()) << run.status();
    const double difference = MaxRelativeDifference(run->final_params, CpuReference(8));
    EXPECT_LT(difference, 1e-2);
    EXPECT_GT(difference, 0) << "16-bit products rounded nothing";
    if (config.loss_scaling().mode() == LossScalingConfig::dynamic) {
      EXPECT_EQ(run->chief.workers(0).overflow_steps(), 0);
    }
  }
}

TEST(GpuWorkerTest, WithoutAUsableGpuTheRunFailsNamingTheDevice) {
  if (UsableGpus() > 0) GTEST_SKIP() << "this machine has a usable GPU";
  ExperimentConfig config = BaseConfig();
  config.set_device("gpu");
  SetInProcessHosts(&config, 1, 1);
  config.mutable_train()->set_batch_size_per_device(8);
  // The worker fails at once; its PS shard then waits startup_seconds for it
  // before giving up, so keep that short.
  config.mutable_timeouts()->set_startup_seconds(3);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(std::string(run.status().message()).find("gpu"), std::string::npos) << run.status();
}

}  // namespace
}  // namespace pstrain
