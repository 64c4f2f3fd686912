// Sync averaging is exact: W workers with batch b reach the same parameters
// after k steps as one worker with batch W*b on the same examples (the
// batcher gives worker w the w-th slice of each global batch).
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
#include "tests/worker/equivalence_util.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {
namespace {

ExperimentConfig BaseConfig() { return EquivalenceConfig("equivalence"); }

double MaxRelativeChange(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  return MaxRelativeDifference(a, b);
}

TEST(SyncEquivalenceTest, WorkersTimesBatchEqualsOneWorkerWithWholeBatch) {
  const int kWorkers = 3, kBatch = 16;

  ExperimentConfig many = BaseConfig();
  SetInProcessHosts(&many, /*num_ps=*/2, kWorkers);
  many.mutable_train()->set_batch_size_per_device(kBatch);
  absl::StatusOr<ClusterRun> distributed = RunInProcessCluster(many);
  ASSERT_TRUE(distributed.ok()) << distributed.status();

  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), kWorkers * kBatch);
  ASSERT_TRUE(single.ok()) << single.status();

  ASSERT_FALSE(single->final_params.empty());
  EXPECT_LT(MaxRelativeDifference(distributed->final_params, single->final_params), 2e-5);

  // The comparison means something only if training moved the parameters:
  // a run with a different seed for the data order must differ clearly.
  ExperimentConfig shuffled = BaseConfig();
  shuffled.mutable_data()->set_shuffle_seed(777);
  absl::StatusOr<ClusterRun> other = RunOnOneDevice(shuffled, kWorkers * kBatch);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_GT(MaxRelativeChange(other->final_params, single->final_params), 1e-3);
}

TEST(SyncEquivalenceTest, PartitionedVariablesGiveTheSameParameters) {
  // hidden1/weights (784x32 floats, ~100 KB) is split over 3 shards.
  ExperimentConfig partitioned = BaseConfig();
  SetInProcessHosts(&partitioned, /*num_ps=*/3, 2);
  partitioned.set_placement("partitioned");
  partitioned.set_partition_bytes(16 * 1024);
  partitioned.mutable_train()->set_batch_size_per_device(8);
  absl::StatusOr<ClusterRun> split = RunInProcessCluster(partitioned);
  ASSERT_TRUE(split.ok()) << split.status();
  int64_t variables_on_shards = 0;
  for (const auto& load : split->chief.ps_load()) {
    EXPECT_GT(load.variables(), 0);
    variables_on_shards += load.variables();
  }
  EXPECT_GT(variables_on_shards, 6);  // more keys than variables: something was split

  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), 16);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_LT(MaxRelativeDifference(split->final_params, single->final_params), 2e-5);
}

// Every synchronous strategy over W workers x N devices x batch b must match
// one device with batch W*N*b after k steps.
// The layout tuner on a sync cluster: only the chief tunes; worker 1 applies
// the chief's layouts as its heartbeats bring them (each one the chief
// chose, in the chief's order, none of its own), and the run reaches the
// parameters it reaches without tuning.
TEST(SyncEquivalenceTest, TheChiefTunesOneLayoutForEveryWorker) {
  const int kWorkers = 2, kBatch = 8, kSteps = 300;
  ExperimentConfig config = BaseConfig();
  config.mutable_train()->set_steps(kSteps);
  SetInProcessHosts(&config, /*num_ps=*/2, kWorkers);
  config.mutable_train()->set_batch_size_per_device(kBatch);
  config.mutable_ps_scheduling()->set_pipeline(true);
  config.mutable_ps_scheduling()->set_tune(true);
  config.set_placement("balanced");
  config.set_partition_bytes(16 * 1024);
  config.mutable_timeouts()->set_heartbeat_seconds(0.01f);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->chief.workers_size(), kWorkers);
  const WorkerReport& chief = run->chief.workers(0).worker() == 0 ? run->chief.workers(0) : run->chief.workers(1);
  const WorkerReport& follower = run->chief.workers(0).worker() == 0 ? run->chief.workers(1) : run->chief.workers(0);
  const LayoutTuning& led = chief.layout_tuning();
  const LayoutTuning& followed = follower.layout_tuning();
  ASSERT_GT(led.decisions_size(), 0) << "the chief's tuner never moved in " << kSteps << " steps";
  ASSERT_GT(followed.decisions_size(), 0) << "worker 1 never applied the chief's layout";
  int64_t last_change = 0;
  for (const LayoutTuning::Decision& d : followed.decisions()) {
    int64_t change = 0;
    absl::string_view why = d.why();
    ASSERT_TRUE(absl::ConsumePrefix(&why, "the chief's layout (its change ") && absl::ConsumeSuffix(&why, ")") &&
                absl::SimpleAtoi(why, &change))
        << d.why();
    ASSERT_GT(change, last_change) << "changes applied out of order";
    ASSERT_LE(change, led.decisions_size());
    const LayoutTuning::Decision& chosen = led.decisions(static_cast<int>(change - 1));
    EXPECT_EQ(d.batch_bytes(), chosen.batch_bytes()) << d.why();
    EXPECT_EQ(d.window_bytes(), chosen.window_bytes()) << d.why();
    EXPECT_EQ(d.pushes_per_shard(), chosen.pushes_per_shard()) << d.why();
    last_change = change;
  }
  EXPECT_FALSE(followed.settled()) << "a follower does not search";

  // A layout moves bytes, not values: the same cluster with the layout it
  // started from reaches the same parameters, bit for bit.
  ExperimentConfig fixed = config;
  fixed.mutable_ps_scheduling()->set_tune(false);
  absl::StatusOr<ClusterRun> untuned = RunInProcessCluster(fixed);
  ASSERT_TRUE(untuned.ok()) << untuned.status();
  EXPECT_EQ(MaxRelativeDifference(run->final_params, untuned->final_params), 0);
}

struct StrategyCase {
  const char* name;
  const char* variable_update;
  const char* all_reduce_spec;
  int workers;
  int devices;
  int num_ps;
  // "inproc", or a real transport the roles (threads here) talk over on
  // 127.0.0.1 ports.
  const char* transport = "inproc";
  // BytePS scheduling: ps_scheduling.pipeline with balanced placement in 16
  // KB slices and a 64 KB push window (pushes queue and go by priority).
  bool pipeline = false;
  // cpu_mirrored: the replicas laid out as GPU replicas (host mirrors,
  // copies that take time; device/cpu/cpu_mirrored_device.cc).
  const char* device = "cpu";
};

// Runs `config` over `transport` (inproc: in-process addresses).
absl::StatusOr<ClusterRun> RunOver(const ExperimentConfig& config, const std::string& transport) {
  return transport == "inproc" ? RunInProcessCluster(config) : RunClusterOverTransport(config, transport);
}

#define SKIP_UNLESS_BUILT(transport)                                                  \
  if (std::string(transport) != "inproc" && !TransportRegistry().Contains(transport)) \
  GTEST_SKIP() << "this build has no " << (transport) << " transport"

void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.name; }

class StrategyEquivalenceTest : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(StrategyEquivalenceTest, MatchesOneDeviceWithTheWholeBatch) {
  const StrategyCase& c = GetParam();
  SKIP_UNLESS_BUILT(c.transport);
  const int kBatch = 8;
  ExperimentConfig config = BaseConfig();
  config.set_variable_update(c.variable_update);
  config.set_all_reduce_spec(c.all_reduce_spec);
  config.set_devices_per_worker(c.devices);
  config.set_device(c.device);
  SetInProcessHosts(&config, c.num_ps, c.workers);
  config.mutable_train()->set_batch_size_per_device(kBatch);
  if (c.pipeline) {
    config.mutable_ps_scheduling()->set_pipeline(true);
    config.mutable_ps_scheduling()->set_window_bytes(64 * 1024);
    config.set_placement("balanced");
    config.set_partition_bytes(16 * 1024);
  } else if (std::string(c.device) == "cpu_mirrored") {
    config.mutable_ps_scheduling()->set_pipeline(false);  // as on GPUs, where it is off unless asked for
  }
  absl::StatusOr<ClusterRun> run = RunOver(config, c.transport);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->chief.global_batch_size(), kBatch * c.workers * c.devices);
  EXPECT_EQ(run->chief.transport(), c.transport == std::string("inproc") ? "grpc" : c.transport);

  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), kBatch * c.workers * c.devices);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_LT(MaxRelativeDifference(run->final_params, single->final_params), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Strategies, StrategyEquivalenceTest,
    ::testing::Values(
        StrategyCase{"ps_2workers_2devices", "parameter_server", "", 2, 2, 2},
        StrategyCase{"replicated_pscpu_3devices", "replicated", "pscpu", 1, 3, 0},
        StrategyCase{"replicated_none_3devices", "replicated", "none", 1, 3, 0},
        StrategyCase{"distributed_replicated_2x2", "distributed_replicated", "none", 2, 2, 2},
        // The same over the RDMA path's transport.
        StrategyCase{"ucx_ps_2workers_2devices", "parameter_server", "", 2, 2, 2, "ucx"},
        StrategyCase{"ucx_ps_3workers", "parameter_server", "", 3, 1, 2, "ucx"},
        StrategyCase{"ucx_distributed_replicated_2x2", "distributed_replicated", "none", 2, 2, 2, "ucx"},
        StrategyCase{"grpc_ps_3workers", "parameter_server", "", 3, 1, 2, "grpc"},
        // BytePS scheduling: partitioned, prioritised, pipelined.
        StrategyCase{"pipeline_ps_2workers_2devices", "parameter_server", "", 2, 2, 2, "inproc", true},
        StrategyCase{"pipeline_ps_3workers", "parameter_server", "", 3, 1, 3, "inproc", true},
        StrategyCase{"pipeline_distributed_replicated_2x2", "distributed_replicated", "none", 2, 2, 2, "inproc", true},
        StrategyCase{"grpc_pipeline_ps_3workers", "parameter_server", "", 3, 1, 2, "grpc", true},
        StrategyCase{"ucx_pipeline_ps_2workers_2devices", "parameter_server", "", 2, 2, 2, "ucx", true},
        // The GPU replica path (host mirrors, copy engines), without a GPU.
        StrategyCase{"mirrored_ps_2workers_2devices", "parameter_server", "", 2, 2, 2, "inproc", false, "cpu_mirrored"},
        StrategyCase{"mirrored_pipeline_ps_2workers_2devices", "parameter_server", "", 2, 2, 2, "inproc", true,
                     "cpu_mirrored"},
        StrategyCase{"mirrored_pipeline_distributed_replicated_2x2", "distributed_replicated", "none", 2, 2, 2,
                     "inproc", true, "cpu_mirrored"},
        StrategyCase{"mirrored_replicated_pscpu_3devices", "replicated", "pscpu", 1, 3, 0, "inproc", false,
                     "cpu_mirrored"},
        StrategyCase{"mirrored_replicated_none_3devices", "replicated", "none", 1, 3, 0, "inproc", false,
                     "cpu_mirrored"}),
    [](const auto& info) { return std::string(info.param.name); });

// allreduce runs real Gloo TCP rings, so its workers get loopback addresses
// (the chief's rendezvous store is served over the in-process transport).
struct AllReduceCase {
  const char* name;
  int workers;
  int devices;
  int64_t fusion_threshold_bytes;
  // Hierarchical all-reduce: hosts of `workers_per_host` consecutive workers
  // (0: hosts told apart by address, the second half of the workers on
  // 127.0.0.2, also loopback).
  bool hierarchical = false;
  int workers_per_host = 0;
  // The chief's rendezvous store over this transport ("inproc": in process).
  const char* transport = "inproc";
};
void PrintTo(const AllReduceCase& c, std::ostream* os) { *os << c.name; }

class AllReduceEquivalenceTest : public ::testing::TestWithParam<AllReduceCase> {};

TEST_P(AllReduceEquivalenceTest, MatchesOneDeviceWithTheWholeBatch) {
  const AllReduceCase& c = GetParam();
  SKIP_UNLESS_BUILT(c.transport);
  const int kBatch = 8;
  ExperimentConfig config = BaseConfig();
  config.set_variable_update("allreduce");
  config.set_devices_per_worker(c.devices);
  config.set_fusion_threshold_bytes(c.fusion_threshold_bytes);
  config.mutable_timeouts()->set_startup_seconds(20);
  config.mutable_cluster()->clear_ps_hosts();
  for (int w = 0; w < c.workers; ++w) {
    const bool second_host = c.hierarchical && c.workers_per_host == 0 && w >= c.workers / 2;
    config.mutable_cluster()->add_worker_hosts((second_host ? "127.0.0.2:" : "127.0.0.1:") + std::to_string(41000 + w));
  }
  if (c.hierarchical) {
    config.set_hierarchical_allreduce(true);
    config.set_workers_per_host(c.workers_per_host);
  }
  config.mutable_train()->set_batch_size_per_device(kBatch);
  absl::StatusOr<ClusterRun> run = RunOver(config, c.transport);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->chief.num_workers(), c.workers);

  absl::StatusOr<ClusterRun> single = RunOnOneDevice(BaseConfig(), kBatch * c.workers * c.devices);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_LT(MaxRelativeDifference(run->final_params, single->final_params), 2e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Fusion, AllReduceEquivalenceTest,
    ::testing::Values(AllReduceCase{"two_workers_fused", 2, 1, 64 << 20},
                      AllReduceCase{"three_workers_per_variable", 3, 1, 0},
                      AllReduceCase{"two_workers_two_devices_small_buffers", 2, 2, 4096},
                      AllReduceCase{"hierarchical_2_hosts_x_2_workers", 4, 1, 64 << 20, true, 2},
                      AllReduceCase{"hierarchical_hosts_by_address_2x2_devices", 4, 2, 4096, true, 0},
                      AllReduceCase{"hierarchical_3_hosts_x_1_worker", 3, 1, 0, true, 1},
                      AllReduceCase{"ucx_store_two_workers_fused", 2, 1, 64 << 20, false, 0, "ucx"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(IndependentTest, ReplicasDivergeWithoutSynchronisation) {
  ExperimentConfig config = BaseConfig();
  config.set_variable_update("independent");
  config.set_devices_per_worker(2);
  SetInProcessHosts(&config, 0, 1);
  config.mutable_train()->set_batch_size_per_device(8);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  // Replica 0 trained alone on its own slices: it must differ from the
  // synchronised result of the same two slices.
  ExperimentConfig replicated = config;
  replicated.set_variable_update("replicated");
  absl::StatusOr<ClusterRun> synced = RunInProcessCluster(replicated);
  ASSERT_TRUE(synced.ok()) << synced.status();
  EXPECT_GT(MaxRelativeDifference(run->final_params, synced->final_params), 1e-4);
}

TEST(SyncEquivalenceTest, ResultDescribesTheRun) {
  ExperimentConfig config = BaseConfig();
  SetInProcessHosts(&config, 2, 2);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_train()->set_evaluate(true);
  config.mutable_train()->set_steps(20);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->chief.num_workers(), 2);
  EXPECT_EQ(run->chief.num_ps(), 2);
  EXPECT_EQ(run->chief.global_batch_size(), 16);
  EXPECT_EQ(run->chief.steps(), 20);
  ASSERT_TRUE(run->chief.has_test_accuracy());
  EXPECT_GT(run->chief.test_accuracy(), 0.2);  // well above chance (0.1) after 20 steps
  ASSERT_EQ(run->chief.ps_load().size(), 2u);
  int64_t applied = 0;
  for (const auto& load : run->chief.ps_load()) applied += load.applied_updates();
  EXPECT_EQ(applied, 20 * 6);  // 6 variables of the MLP, one update per step each
}

TEST(SyncBackupWorkersTest, FewerReplicasToAggregateThanWorkersRunsToCompletion) {
  // 3 of 4 gradients per step; the fourth is dropped. Once workers finish,
  // the last steps must not wait for gradients nobody will send.
  ExperimentConfig config = BaseConfig();
  SetInProcessHosts(&config, 2, 4);
  config.set_replicas_to_aggregate(3);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_train()->set_steps(12);
  config.mutable_timeouts()->set_sync_step_seconds(60);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  // How many gradients are dropped depends on timing (a lagging worker that
  // pulls a newer version contributes to it instead), so the check is the
  // accounting: every variable advanced at least 12 steps (each worker's
  // pulled versions increase), and each of the 4 x 12 pushes of a variable
  // was either dropped or is part of an update of at most 3 contributions.
  ASSERT_FALSE(run->chief.ps_load().empty());
  for (const auto& load : run->chief.ps_load()) {
    ASSERT_GT(load.variables(), 0);
    EXPECT_GE(load.applied_updates(), 12 * load.variables()) << "shard " << load.shard();
    EXPECT_GE(load.dropped_gradients() + 3 * load.applied_updates(), 4 * 12 * load.variables())
        << "shard " << load.shard();
  }
}

TEST(AsyncTrainingTest, EveryGradientIsAppliedOnArrivalPipelinedToo) {
  for (const bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pipelined" : "not pipelined");
    ExperimentConfig config = BaseConfig();
    config.set_consistency("async");
    config.mutable_ps_scheduling()->set_pipeline(pipeline);
    SetInProcessHosts(&config, 2, 2);
    config.mutable_train()->set_batch_size_per_device(8);
    config.mutable_train()->set_steps(10);
    absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
    ASSERT_TRUE(run.ok()) << run.status();
    int64_t applied = 0;
    for (const auto& load : run->chief.ps_load()) applied += load.applied_updates();
    EXPECT_EQ(applied, 2 * 10 * 6);  // every push of every worker, per variable
    EXPECT_TRUE(std::isfinite(run->chief.final_loss()));
  }
}

TEST(AsyncTrainingTest, EveryGradientIsAppliedOnArrival) {
  ExperimentConfig config = BaseConfig();
  config.set_consistency("async");
  SetInProcessHosts(&config, 2, 2);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_train()->set_steps(10);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();
  int64_t applied = 0;
  for (const auto& load : run->chief.ps_load()) applied += load.applied_updates();
  EXPECT_EQ(applied, 2 * 10 * 6);  // every push of every worker, per variable
  EXPECT_TRUE(std::isfinite(run->chief.final_loss()));
}

}  // namespace
}  // namespace pstrain
