// Emulated clusters end to end through pstrain-launch (config `emulation`):
// known answers (workers that hardly communicate scale at 100%; one worker moving a
// 100 MB model to and from one PS over 1 Gbit/s takes 2 x 0.8 s a step), a
// run forced CPU-bound flagged as such, equivalence with a real CPU model
// (the same parameters as without emulation), the tuner's layout across
// hosts, and the refusals (no root, no iproute2) before anything starts. Needs root; skips saying so otherwise.
#include <sys/stat.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/launch_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::test {
namespace {

class EmulationTest : public ::testing::Test {
 public:
  Launched Launch(const std::string& name, const std::string& yaml, std::vector<std::string> prefix = {},
                  const std::vector<std::string>& launch_flags = {}) {
    return LaunchConfig(dir_.path(), name, yaml, std::move(prefix), launch_flags);
  }

 protected:
  void SetUp() override {
    if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  }

  TempDir dir_;
};

TEST_F(EmulationTest, WorkersThatHardlyCommunicateScaleAtOneHundredPercent) {
  // 4 workers, 2 per host, each an emulated device of 64 images/sec at
  // batch 32 (0.5 s a step); their all-reduce moves 2.4 KB a step.
  const Launched run = Launch("tiny_allreduce", R"(
cluster: {worker_hosts: ["w:1", "w:2", "w:3", "w:4"]}
model: {name: mlp, hidden_units: [8], input_shape: [1, 8, 8], num_classes: 4}
data: {source: synthetic, synthetic_examples: 512}
optimizer: {name: sgd, learning_rate: 0.01}
train: {batch_size_per_device: 32, steps: 12, warmup_steps: 2, display_every: 4, evaluate: false}
variable_update: allreduce
device: emulated
emulation: {workers_per_host: 2, link_gbps: 1, images_per_second: 64}
)");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  const Emulation& e = run.result->emulation();
  EXPECT_EQ(e.hosts(), 2);
  EXPECT_EQ(e.device_images_per_sec(), 64);
  // Within 5%: a worker's own work per step (the optimizer, the step's
  // bookkeeping) runs beside the modelled compute, 1-4% of a 0.5 s step on
  // the 2-core VMs measured, more with another test running beside it.
  EXPECT_NEAR(e.scaling_efficiency(), 1.0, 0.05) << run.output;
  EXPECT_NEAR(run.result->images_per_sec(), 4 * 64, 4 * 64 * 0.05);
  EXPECT_FALSE(e.cpu_bound()) << e.cpu_bound_reason();
  EXPECT_TRUE(absl::StrContains(run.output, "launch: emulation: 2 emulated hosts")) << run.output;
}

// One worker, one PS on its own host, a 100 MB model (784 x 32000 floats),
// links at 1 Gbit/s, devices that take no time: a sync step pulls 100 MB
// and pushes 100 MB, 0.8 s each (bytes / rate; TCP and Ethernet headers add
// about 5%). Time scale 8: the links run at 0.125 Gbit/s, and rates are
// reported x 8, so the answer is the same (at 4 a 2-core Intel VM running
// another test beside it could not keep up). Unpipelined (the pipeline
// overlaps the pull with the push on a full-duplex link).
constexpr char kHundredMegabyteModel[] = R"(
cluster: {ps_hosts: ["p:1"], worker_hosts: ["w:1"]}
ps_scheduling: {pipeline: false}
model: {name: mlp, hidden_units: [32000]}
data: {source: synthetic, synthetic_examples: 256}
optimizer: {name: sgd, learning_rate: 0.001}
train: {batch_size_per_device: 16, steps: 3, warmup_steps: 1, display_every: 1, evaluate: false}
variable_update: parameter_server
consistency: sync
device: emulated
timeouts: {sync_step_seconds: 120}
)";

TEST_F(EmulationTest, AHundredMegabyteModelOverOneGigabitTakesPullPlusPushTime) {
  const Launched run = Launch("ps_1gbps", absl::StrCat(kHundredMegabyteModel,
                                                       "emulation: {link_gbps: 1, time_scale: 8, "
                                                       "images_per_second: 1000000}\n"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  ASSERT_EQ(run.result->ps_load_size(), 1);
  const double bytes = static_cast<double>(run.result->ps_load(0).variable_bytes());
  ASSERT_GT(bytes, 100e6) << "the model is 100 MB";
  const double expected_step = 2 * bytes * 8 / 1e9;  // pull + push at 1 Gbit/s
  const double step = 16 / run.result->images_per_sec();
  EXPECT_NEAR(step, expected_step, expected_step * 0.15) << run.output;
  EXPECT_EQ(run.result->emulation().time_scale(), 8);
  EXPECT_FALSE(run.result->emulation().cpu_bound()) << run.result->emulation().cpu_bound_reason();
}

// The same model at byte scale 4 (pstrain-launch --byte_scale 4) and time
// scale 2: the shard holds a quarter of the bytes, the links run at the same
// 0.125 Gbit/s, and a step takes what the whole model takes over 1 Gbit/s,
// in a quarter of the time.
TEST_F(EmulationTest, AByteScaleMovesAQuarterOfTheBytesInTheModelledTime) {
  const Launched run = Launch(
      "ps_1gbps_bytes",
      absl::StrCat(kHundredMegabyteModel, "emulation: {link_gbps: 1, time_scale: 2, images_per_second: 1000000}\n"), {},
      {"--byte_scale", "4"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  ASSERT_EQ(run.result->ps_load_size(), 1);
  const double bytes = static_cast<double>(run.result->ps_load(0).variable_bytes());
  EXPECT_GT(bytes, 25e6) << "a quarter of 100 MB";
  EXPECT_LT(bytes, 26e6) << "a quarter of 100 MB";
  const double expected_step = 2 * 4 * bytes * 8 / 1e9;  // the whole model's pull + push at 1 Gbit/s
  const double step = 16 / run.result->images_per_sec();
  EXPECT_NEAR(step, expected_step, expected_step * 0.15) << run.output;
  EXPECT_EQ(run.result->emulation().byte_scale(), 4);
  EXPECT_TRUE(absl::StrContains(run.output, "time scale 2, byte scale 4")) << run.output;
  EXPECT_FALSE(run.result->emulation().cpu_bound()) << run.result->emulation().cpu_bound_reason();
}

TEST_F(EmulationTest, ARunWhoseMachineCannotKeepUpIsFlaggedCpuBound) {
  // The same 100 MB model, uncapped links and no time dilation: moving the
  // bytes keeps this machine's CPUs busy, not the emulated links or devices.
  const Launched run =
      Launch("cpu_bound", absl::StrCat(kHundredMegabyteModel, "emulation: {images_per_second: 1000000}\n"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  const Emulation& e = run.result->emulation();
  EXPECT_TRUE(e.cpu_bound()) << "machine busy " << e.machine_cpu_busy() << ", worker cores "
                             << e.max_worker_cpu_cores();
  EXPECT_GT(e.suggested_time_scale(), 1);
  EXPECT_TRUE(absl::StrContains(run.output, "CPU-BOUND, not valid")) << run.output;
}

// A real CPU model on emulated hosts and links computes what it computes
// without them: sync is deterministic, so the results are equal.
TEST_F(EmulationTest, ARealModelOnEmulatedLinksEndsWithTheSameParameters) {
  const std::string base = R"(
cluster: {ps_hosts: ["p:1", "p:2"], worker_hosts: ["w:1", "w:2"]}
model: {name: mlp, hidden_units: [64, 32]}
optimizer: {name: momentum, learning_rate: 0.05, momentum: 0.9}
train: {batch_size_per_device: 64, steps: 150, display_every: 50}
variable_update: parameter_server
consistency: sync
)";
  const Launched plain = Launch("plain", base);
  const Launched emulated = Launch(
      "emulated", absl::StrCat(base, "emulation: {workers_per_host: 2, ps_placement: colocated, link_gbps: 1}\n"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(emulated.exit_code, 0) << emulated.output;
  ASSERT_TRUE(plain.result.ok() && emulated.result.ok());
  EXPECT_EQ(emulated.result->test_accuracy(), plain.result->test_accuracy());
  EXPECT_EQ(emulated.result->final_loss(), plain.result->final_loss());
  EXPECT_GT(plain.result->test_accuracy(), 0.7);
  EXPECT_EQ(emulated.result->emulation().hosts(), 1);                  // both workers and both shards on one host
  EXPECT_EQ(emulated.result->emulation().device_images_per_sec(), 0);  // a real device: no modelled rate
}

// The pipeline's layout tuner with each worker on an emulated host of its
// own (2 workers, 2 colocated shards, 1 Gbit/s links): the chief's layout
// crosses the links in its heartbeats, and worker 1 applies only the
// chief's changes (result.json's workers[].layout_tuning).
TEST_F(EmulationTest, TheChiefsLayoutReachesAWorkerOnAnotherHost) {
  const Launched run = Launch("chief_layout", R"(
cluster: {ps_hosts: ["p:1", "p:2"], worker_hosts: ["w:1", "w:2"]}
model: {name: mlp, hidden_units: [64, 32]}
optimizer: {name: momentum, learning_rate: 0.05, momentum: 0.9}
train: {batch_size_per_device: 64, steps: 200, display_every: 50, evaluate: false}
variable_update: parameter_server
consistency: sync
ps_scheduling: {pipeline: true, tune: true}
timeouts: {heartbeat_seconds: 0.02}
emulation: {workers_per_host: 1, ps_placement: colocated, link_gbps: 1}
)");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_TRUE(run.result.ok()) << run.result.status();
  EXPECT_EQ(run.result->emulation().hosts(), 2) << run.output;
  ASSERT_EQ(run.result->workers_size(), 2);
  const LayoutTuning& chief = run.result->workers(0).layout_tuning();
  const LayoutTuning& other = run.result->workers(1).layout_tuning();
  ASSERT_GT(chief.decisions_size(), 0) << run.output;
  ASSERT_GT(other.decisions_size(), 0) << "worker 1 never applied the chief's layout\n" << run.output;
  for (const LayoutTuning::Decision& d : other.decisions()) {
    EXPECT_TRUE(absl::StartsWith(d.why(), "the chief's layout (its change ")) << d.why();
  }
}

// configs/dlrm_synthetic_sync.yaml on an eighth of its data, every role on
// an emulated host of its own (2 PS, 2 workers; 10 Gbit/s links), with
// `extra` overrides: every step's sparse pulls and pushes of 26 tables cross
// the bridge. The run must end near the planted AUC as on loopback
// (integration_training_test's DlrmTrainingTest, same data), with rows on
// every shard.
Launched LaunchDlrmAcrossHosts(EmulationTest& test, const std::string& name, const std::string& extra) {
  const std::string yaml = WithOverrides(
      ReadFile(SourcePath("configs/dlrm_synthetic_sync.yaml")),
      absl::StrCat(
          "data: {source: synthetic_ctr, ctr: {train_examples: 131072, test_examples: 16384, seed: 7, zipf_s: 1.8}}\n"
          "train: {batch_size_per_device: 512, epochs: 3, display_every: 100, eval_batch_size: 8192}\n"
          "emulation: {link_gbps: 10}\n",
          extra));
  Launched run = test.Launch(name, yaml);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  if (!run.result.ok() || !run.result->has_test_auc() || !run.result->has_planted_auc()) {
    ADD_FAILURE() << "no test AUC: " << run.output;
    return run;
  }
  EXPECT_EQ(run.result->emulation().hosts(), 4) << run.output;
  std::cout << name << ": test AUC " << run.result->test_auc() << ", planted " << run.result->planted_auc()
            << std::endl;
  EXPECT_GT(run.result->test_auc(), 0.7);
  EXPECT_LT(run.result->planted_auc() - run.result->test_auc(), 0.05);
  EXPECT_EQ(run.result->ps_load_size(), 2);
  for (const ShardLoad& shard : run.result->ps_load()) EXPECT_GT(shard.table_rows(), 1000) << shard.shard();
  return run;
}

TEST_F(EmulationTest, ADlrmRunAcrossEmulatedHostsReachesThePlantedAuc) {
  LaunchDlrmAcrossHosts(*this, "dlrm_hosts", "");
}

// The hybrid: the dense MLPs all-reduced over Gloo rings between the two
// workers' hosts, the tables on the two PS hosts, which hold no dense
// variable; as near the planted AUC as the PS run (the same sync steps).
TEST_F(EmulationTest, ADlrmWithAllReducedMlpsBesideTablesOnThePsAcrossEmulatedHosts) {
  const Launched run = LaunchDlrmAcrossHosts(*this, "dlrm_hybrid_hosts", "variable_update: allreduce\n");
  ASSERT_TRUE(run.result.ok());
  EXPECT_EQ(run.result->variable_update(), "allreduce");
  for (const ShardLoad& shard : run.result->ps_load()) EXPECT_EQ(shard.variables(), 0) << shard.shard();
}

TEST_F(EmulationTest, WithoutRootOrIproute2TheEmulationIsRefusedBeforeAnythingStarts) {
  const std::string yaml = R"(
cluster: {worker_hosts: ["w:1"]}
model: {name: mlp, hidden_units: [8], input_shape: [1, 8, 8], num_classes: 4}
data: {source: synthetic}
train: {batch_size_per_device: 8, steps: 2, evaluate: false}
variable_update: independent
emulation: {link_gbps: 1}
)";
  // Another user must be able to read the config (the temp dir is 0700).
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  const Launched nobody =
      Launch("nobody", yaml, {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  EXPECT_EQ(nobody.exit_code, 2) << nobody.output;
  EXPECT_TRUE(absl::StrContains(nobody.output, "emulation: emulated hosts need root")) << nobody.output;
  EXPECT_TRUE(absl::StrContains(nobody.output, "nothing was started")) << nobody.output;
  const Launched no_ip = Launch("no_ip", yaml, {"/usr/bin/env", "PATH=" + dir_.path()});
  EXPECT_EQ(no_ip.exit_code, 2) << no_ip.output;
  EXPECT_TRUE(absl::StrContains(no_ip.output, "emulated hosts need iproute2's `ip` on PATH")) << no_ip.output;
}

}  // namespace
}  // namespace pstrain::test
