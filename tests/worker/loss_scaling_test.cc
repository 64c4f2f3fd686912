// Loss scaling in the worker (optim/loss_scaler.h): a power-of-two scale
// changes no gradient and no parameter; an overflowed step is noticed, sent
// to parameter servers as zeros and skipped by the local optimizer; every
// worker reports its overflow steps and final scale; strategies that keep
// gradients on GPUs refuse it.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "device/device_context.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/equivalence_util.h"
#include "tests/worker/in_process_cluster.h"
#include "worker/local_optimizer.h"
#include "worker/replica_set.h"
#include "worker/strategy.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

constexpr int kBatch = 16;

// The equivalence tests' MLP, on Fashion-MNIST's examples.
ModelConfig MlpConfig() {
  ModelConfig config = EquivalenceConfig("loss_scaling").model();
  for (int d : {1, 28, 28}) config.add_input_shape(d);
  config.set_num_classes(10);
  return config;
}

std::unique_ptr<ReplicaSet> MlpReplica(const ReplicaOptions& options = {}) {
  absl::StatusOr<std::unique_ptr<ReplicaSet>> replicas = ReplicaSet::Create(MlpConfig(), 1, options);
  EXPECT_TRUE(replicas.ok()) << replicas.status();
  if (!replicas.ok()) return nullptr;
  (*replicas)->InitializeVariables(42);
  return std::move(*replicas);
}

// The first kBatch Fashion-MNIST training examples.
struct Batch {
  Tensor images;
  std::vector<int32_t> labels;
};
Batch FashionMnistBatch() {
  static const Datasets* data = [] {
    absl::StatusOr<Datasets> loaded = LoadDatasets(EquivalenceConfig("loss_scaling"), /*with_test=*/false);
    CHECK(loaded.ok()) << loaded.status();
    return new Datasets(std::move(*loaded));
  }();
  absl::StatusOr<ShardedBatcher> batcher = ShardedBatcher::Create(&data->train, 0, 1, kBatch, 1, /*shuffle=*/false);
  CHECK(batcher.ok()) << batcher.status();
  Batch batch;
  CHECK(batcher->Fill(0, &batch.images, &batch.labels).ok());
  return batch;
}

TEST(ReplicaLossScalingTest, UnscaledGradientsEqualTheUnscaledStepsBitForBit) {
  std::unique_ptr<ReplicaSet> plain = MlpReplica(), scaled = MlpReplica();
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(scaled, nullptr);
  scaled->SetLossScale(65536.0f);
  const Batch batch = FashionMnistBatch();
  int hooked = 0;
  const float plain_loss = plain->TrainStep(0, batch.images, batch.labels.data(), nullptr);
  const float scaled_loss = scaled->TrainStep(0, batch.images, batch.labels.data(), [&](int) { ++hooked; });
  EXPECT_EQ(scaled_loss, plain_loss);  // the loss itself is not scaled
  EXPECT_TRUE(scaled->gradients_finite(0));
  const std::vector<Variable>& a = plain->variables(0);
  const std::vector<Variable>& b = scaled->variables(0);
  EXPECT_EQ(hooked, static_cast<int>(b.size()));
  ASSERT_EQ(a.size(), b.size());
  double largest = 0;
  for (size_t v = 0; v < a.size(); ++v) {
    ASSERT_EQ(a[v].grad.num_elements(), b[v].grad.num_elements());
    for (int64_t i = 0; i < a[v].grad.num_elements(); ++i) {
      ASSERT_EQ(a[v].grad.data()[i], b[v].grad.data()[i]) << a[v].name << "[" << i << "]";
      largest = std::max(largest, std::abs(static_cast<double>(a[v].grad.data()[i])));
    }
  }
  EXPECT_GT(largest, 1e-4) << "the step computed gradients";
}

// An example with an infinite pixel: every gradient of the step overflows.
Batch CorruptBatch() {
  Batch batch = FashionMnistBatch();
  batch.images.data()[100] = std::numeric_limits<float>::infinity();
  return batch;
}

bool AllGradientsFinite(const std::vector<Variable>& vars) {
  for (const Variable& v : vars) {
    for (float x : v.grad.span()) {
      if (!std::isfinite(x)) return false;
    }
  }
  return true;
}

TEST(ReplicaLossScalingTest, OverflowIsNoticedAndZeroedForParameterServers) {
  ReplicaOptions options;
  options.zero_non_finite_gradients = true;
  std::unique_ptr<ReplicaSet> replica = MlpReplica(options);
  ASSERT_NE(replica, nullptr);
  replica->SetLossScale(1024.0f);
  const Batch corrupt = CorruptBatch();
  std::vector<int> seen_non_finite;
  replica->TrainStep(0, corrupt.images, corrupt.labels.data(), [&](int v) {
    // What a strategy's hook sees is already finite.
    for (float x : replica->variables(0)[v].grad.span()) {
      if (!std::isfinite(x)) seen_non_finite.push_back(v);
    }
  });
  EXPECT_FALSE(replica->gradients_finite(0));
  EXPECT_TRUE(seen_non_finite.empty());
  const std::vector<Variable>& vars = replica->variables(0);
  for (float x : vars[0].grad.span()) ASSERT_EQ(x, 0.0f) << vars[0].name;
  // The next clean step is finite again.
  const Batch clean = FashionMnistBatch();
  replica->TrainStep(0, clean.images, clean.labels.data(), nullptr);
  EXPECT_TRUE(replica->gradients_finite(0));
  EXPECT_TRUE(AllGradientsFinite(vars));
}

TEST(ReplicaLossScalingTest, OverflowIsLeftForTheLocalOptimizerWhichSkipsTheStep) {
  std::unique_ptr<ReplicaSet> replica = MlpReplica();
  ASSERT_NE(replica, nullptr);
  replica->SetLossScale(1024.0f);
  std::vector<Variable>& vars = replica->variables(0);
  OptimizerConfig sgd;
  sgd.set_name("momentum");
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> skipping = LocalOptimizer::Create(sgd, vars, 10, true);
  absl::StatusOr<std::unique_ptr<LocalOptimizer>> applying = LocalOptimizer::Create(sgd, vars, 10, false);
  ASSERT_TRUE(skipping.ok()) << skipping.status();
  ASSERT_TRUE(applying.ok()) << applying.status();
  const std::vector<float> before(vars[0].value.span().begin(), vars[0].value.span().end());

  const Batch corrupt = CorruptBatch();
  replica->TrainStep(0, corrupt.images, corrupt.labels.data(), nullptr);
  EXPECT_FALSE(replica->gradients_finite(0));
  EXPECT_FALSE(AllGradientsFinite(vars));
  EXPECT_FALSE((*skipping)->Apply(vars, 0));
  EXPECT_EQ((*skipping)->skipped_steps(), 1);
  EXPECT_EQ(std::vector<float>(vars[0].value.span().begin(), vars[0].value.span().end()), before);

  const Batch clean = FashionMnistBatch();
  replica->TrainStep(0, clean.images, clean.labels.data(), nullptr);
  ASSERT_TRUE(replica->gradients_finite(0));
  EXPECT_TRUE((*skipping)->Apply(vars, 1));
  EXPECT_EQ((*skipping)->skipped_steps(), 1);
  EXPECT_NE(std::vector<float>(vars[0].value.span().begin(), vars[0].value.span().end()), before);

  // Without skipping, the same overflow would have reached the variables.
  replica->TrainStep(0, corrupt.images, corrupt.labels.data(), nullptr);
  EXPECT_TRUE((*applying)->Apply(vars, 2));
  bool values_finite = true;
  for (float x : vars[0].value.span()) values_finite &= std::isfinite(x);
  EXPECT_FALSE(values_finite);
}

// Every kind of strategy (parameter servers, a local reduction, all-reduce
// between workers): dynamic scaling from 2^16, growing every 2 steps,
// reaches the unscaled run's parameters exactly.
struct ScalingCase {
  const char* name;
  const char* variable_update;
  const char* all_reduce_spec;
  int workers;
  int devices;
  int num_ps;
  const char* precision = "fp32";
};
void PrintTo(const ScalingCase& c, std::ostream* os) { *os << c.name; }

class ClusterLossScalingTest : public ::testing::TestWithParam<ScalingCase> {};

ExperimentConfig CaseConfig(const ScalingCase& c) {
  ExperimentConfig config = EquivalenceConfig("loss_scaling");
  config.set_variable_update(c.variable_update);
  config.set_all_reduce_spec(c.all_reduce_spec);
  config.set_devices_per_worker(c.devices);
  ExperimentConfig::Precision precision = ExperimentConfig::fp32;
  ExperimentConfig::Precision_Parse(c.precision, &precision);
  config.set_precision(precision);
  config.mutable_train()->set_batch_size_per_device(8);
  SetInProcessHosts(&config, c.num_ps, c.workers);
  if (std::string(c.variable_update) == "allreduce") {
    config.mutable_timeouts()->set_startup_seconds(20);
    config.mutable_cluster()->clear_worker_hosts();
    for (int w = 0; w < c.workers; ++w)
      config.mutable_cluster()->add_worker_hosts("127.0.0.1:" + std::to_string(41300 + w));
  }
  return config;
}

TEST_P(ClusterLossScalingTest, PowerOfTwoScalingLeavesTheParametersUnchanged) {
  const ScalingCase& c = GetParam();
  if (const absl::Status bf16 = CheckPrecision(DeviceKind::kCpu, *ParsePrecision(c.precision)); !bf16.ok()) {
    GTEST_SKIP() << bf16.message();
  }
  ExperimentConfig scaled = CaseConfig(c);
  scaled.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
  scaled.mutable_loss_scaling()->set_initial_scale(65536);
  scaled.mutable_loss_scaling()->set_growth_interval(2);
  absl::StatusOr<ClusterRun> with = RunInProcessCluster(scaled);
  ASSERT_TRUE(with.ok()) << with.status();
  absl::StatusOr<ClusterRun> without = RunInProcessCluster(CaseConfig(c));
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_FALSE(without->final_params.empty());
  EXPECT_EQ(MaxRelativeDifference(with->final_params, without->final_params), 0.0);

  // 6 clean steps, growing every 2: 2^16 -> 2^19 on every worker.
  ASSERT_EQ(with->chief.workers_size(), c.workers);
  for (const WorkerReport& w : with->chief.workers()) {
    EXPECT_EQ(w.overflow_steps(), 0) << "worker " << w.worker();
    EXPECT_EQ(w.loss_scale(), 524288.0) << "worker " << w.worker();
  }
  for (const WorkerReport& w : without->chief.workers()) EXPECT_EQ(w.loss_scale(), 0.0);
}

INSTANTIATE_TEST_SUITE_P(Strategies, ClusterLossScalingTest,
                         ::testing::Values(ScalingCase{"ps_2workers_2devices", "parameter_server", "", 2, 2, 2},
                                           ScalingCase{"replicated_pscpu_3devices", "replicated", "pscpu", 1, 3, 0},
                                           ScalingCase{"allreduce_2workers", "allreduce", "", 2, 1, 0},
                                           // bf16 rounding is exact under power-of-two scales too.
                                           ScalingCase{"ps_2workers_bf16", "parameter_server", "", 2, 1, 1, "bf16"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LossScalingConfigTest, BadFieldsAndGpuResidentGradientsAreRefused) {
  ExperimentConfig config = EquivalenceConfig("loss_scaling");
  SetInProcessHosts(&config, 1, 1);
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
  config.mutable_loss_scaling()->set_backoff_factor(2);
  EXPECT_THAT(NeedsOf(config, "exp.yaml").status().message(),
              HasSubstr("exp.yaml: field 'loss_scaling.backoff_factor': expected a number in (0, 1), got 2"));

  config.mutable_loss_scaling()->set_backoff_factor(0.5f);
  EXPECT_TRUE(NeedsOf(config, "exp.yaml").ok());
  // Gradients summed on the GPUs (local_parameter_device gpu) never reach
  // the host whole: unscaling them there is not implemented.
  config.set_device("gpu");
  config.set_devices_per_worker(2);
  config.set_local_parameter_device("gpu");
  const absl::Status refused = NeedsOf(config, "exp.yaml").status();
  EXPECT_THAT(refused.message(), HasSubstr("field 'loss_scaling.mode': expected none for variable_update "
                                           "parameter_server and local_parameter_device gpu"));
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::none);
  EXPECT_TRUE(NeedsOf(config, "exp.yaml").ok()) << NeedsOf(config, "exp.yaml").status();

  // The NCCL strategies keep the gradients on the GPUs and unscale them
  // there (worker/strategies/nccl_allreduce.cc).
  config.mutable_loss_scaling()->set_mode(LossScalingConfig::dynamic);
  config.set_local_parameter_device("cpu");
  config.set_variable_update("replicated");
  config.set_all_reduce_spec("nccl");
  config.clear_cluster();
  SetInProcessHosts(&config, 1, 1);
  config.mutable_cluster()->clear_ps_hosts();
  absl::StatusOr<StrategyNeeds> nccl = NeedsOf(config, "exp.yaml");
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  EXPECT_FALSE(nccl->host_mirrors);
  EXPECT_TRUE(nccl->unscales_on_device);
}

}  // namespace
}  // namespace pstrain
