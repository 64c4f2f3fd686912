// One worker of emulated devices inside an emulated host (emulation.topology)
// through pstrain-launch: each in-worker strategy takes at least the time
// its modelled copies take (a rate above the bound means a copy was not
// charged), and those without in-host traffic are not held to it. Needs
// root (the launcher's emulated host); skips saying so otherwise.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/launch_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain::test {
namespace {

constexpr double kGB = 1e9;
// The model: an MLP whose first layer is 784 x 32000 floats (100.4 MB).
constexpr double kModelBytes = (784.0 * 32000 + 32000 + 32000 * 10 + 10) * 4;
// 4 devices x 32 images a step.
constexpr double kImagesPerStep = 4 * 32;

class SingleNodeEmulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
  }

  // One worker of 4 emulated devices on `topology` that compute in no time,
  // with `strategy` (config lines).
  Launched Launch(const std::string& name, const std::string& strategy, int ps,
                  const std::string& topology = "p100_pcie") {
    const std::string hosts =
        ps > 0 ? "cluster: {ps_hosts: [\"p:1\"], worker_hosts: [\"w:1\"]}\n" : "cluster: {worker_hosts: [\"w:1\"]}\n";
    return LaunchConfig(dir_.path(), name,
                        hosts + R"(
model: {name: mlp, hidden_units: [32000], input_shape: [1, 28, 28], num_classes: 10}
data: {source: synthetic, synthetic_examples: 512}
optimizer: {name: sgd, learning_rate: 0.01}
train: {batch_size_per_device: 32, steps: 8, warmup_steps: 2, display_every: 4, evaluate: false}
device: emulated
devices_per_worker: 4
emulation: {ps_placement: colocated, images_per_second: 1000000, topology: )" +
                            topology + "}\n" + strategy);
  }

  // Runs `strategy` and checks its rate is at most what `seconds_per_step`
  // of modelled copies allow (2% for rounding); returns the rate.
  double RateAtMost(const std::string& name, const std::string& strategy, int ps, double seconds_per_step,
                    const std::string& topology = "p100_pcie") {
    const Launched run = Launch(name, strategy, ps, topology);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    if (!run.result.ok()) {
      ADD_FAILURE() << run.result.status() << "\n" << run.output;
      return 0;
    }
    EXPECT_TRUE(absl::StrContains(run.output, "Topology:    4 devices of " + topology)) << run.output;
    const double bound = kImagesPerStep / seconds_per_step;
    EXPECT_LE(run.result->images_per_sec(), bound * 1.02) << name << ": faster than its copies allow";
    std::cout << name << ": " << run.result->images_per_sec() << " images/sec (bound " << bound << ")" << std::endl;
    return run.result->images_per_sec();
  }

  TempDir dir_;
};

TEST_F(SingleNodeEmulationTest, EachStrategyTakesAtLeastItsModelledCopies) {
  // PCIe 3.0 at 12 GB/s, two devices per switch: 4 devices moving the model
  // to or from the host at once share two switch uplinks, 2 x 100 MB each.
  const double all_to_host = 2 * kModelBytes / (12 * kGB);
  const double host_sum = 4 * kModelBytes / (76.8 * kGB);  // reads of 4 gradients
  RateAtMost("pscpu", "variable_update: replicated\nall_reduce_spec: pscpu\n", 0,
             all_to_host /*up*/ + all_to_host /*down*/ + host_sum);
  // The ring 0-1-2-3 shares no link: 2 x 3/4 of the bytes over 12 GB/s.
  RateAtMost("nccl", "variable_update: replicated\nall_reduce_spec: nccl\n", 0, 1.5 * kModelBytes / (12 * kGB));
  // Per variable, three gradients to the owner (two through the switch's
  // uplink), then the mean back: the first layer alone 2 x 2 x 100 MB / 12.
  RateAtMost("none", "variable_update: replicated\nall_reduce_spec: none\n", 0, 2 * 2 * 784.0 * 32000 * 4 / (12 * kGB));
  // PS on the devices: uploads, then the gradients to their owner and its
  // sum down: at least the uploads and one variable's gathering.
  RateAtMost("ps_gpu", "variable_update: parameter_server\nlocal_parameter_device: gpu\n", 1,
             all_to_host + 2 * 784.0 * 32000 * 4 / (12 * kGB));
  // NVLink: the ring 0-1-2-3 over links of 25 and 50 GB/s, held by 25.
  RateAtMost("nccl_nvlink", "variable_update: replicated\nall_reduce_spec: nccl\n", 0, 1.5 * kModelBytes / (25 * kGB),
             "v100_nvlink");
}

// What each strategy moves, counted by the interconnect over the run's 8
// steps: known answers, whatever the machine's speed.
TEST_F(SingleNodeEmulationTest, EachStrategyMovesItsKnownBytes) {
  auto moved = [&](const std::string& name, const std::string& strategy) -> double {
    const Launched run = Launch(name, strategy, 0);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    const std::string key = "worker 0 interconnect: ";
    const size_t at = run.output.find(key);
    if (at == std::string::npos) {
      ADD_FAILURE() << name << ": no interconnect line\n" << run.output;
      return -1;
    }
    return std::stod(run.output.substr(at + key.size()));
  };
  constexpr int kSteps = 8;
  // Each step: 4 uploads and 4 downloads of the model, and the host sum's
  // pass over memory (4 gradients read, one written).
  EXPECT_EQ(moved("pscpu_bytes", "variable_update: replicated\nall_reduce_spec: pscpu\n"), kSteps * 13 * kModelBytes);
  // Each step: every variable's ring, 4 links x 2 x 3/4 of its bytes.
  EXPECT_EQ(moved("nccl_bytes", "variable_update: replicated\nall_reduce_spec: nccl\n"), kSteps * 6 * kModelBytes);
  // Each step: per variable 3 copies in and 3 out.
  EXPECT_EQ(moved("none_bytes", "variable_update: replicated\nall_reduce_spec: none\n"), kSteps * 6 * kModelBytes);
  EXPECT_EQ(moved("independent_bytes", "variable_update: independent\n"), 0);
}

}  // namespace
}  // namespace pstrain::test
