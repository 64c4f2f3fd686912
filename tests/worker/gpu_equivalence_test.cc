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

ExperimentConfig BaseConfig() {
  ExperimentConfig config = EquivalenceConfig("gpu_equivalence");
  config.mutable_timeouts()->set_startup_seconds(60);
  return config;
}

// One CPU device with the whole global batch.
std::vector<std::vector<float>> CpuReference(int global_batch) {
  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), global_batch);
  EXPECT_TRUE(single.ok()) << single.status();
  return single.ok() ? single->final_params : std::vector<std::vector<float>>{};
}

// GPU and CPU sum in different orders: fp32 agreement, not bitwise.
constexpr double kTolerance = 1e-4;

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
