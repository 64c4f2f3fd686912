// The shipped experiments train to their targets through pstrain-launch, as a
// user runs them: real processes, real gRPC on loopback, real Fashion-MNIST.
#include "absl/strings/str_cat.h"
#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

RunResult LaunchAndRead(const std::string& config) {
  TempDir dir;
  const std::string run_dir = dir.path() + "/run";
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", SourcePath(config), "--run_dir", run_dir}, dir.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
  EXPECT_TRUE(status.has_value()) << "pstrain-launch did not finish in 5 minutes";
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "launch failed:\n"
                                                                         << launch.out() << launch.err();
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  EXPECT_TRUE(result.ok()) << result.status() << "\n" << launch.out();
  return result.ok() ? *result : RunResult{};
}

TEST(TrainingTest, SyncMlpReachesTargetAccuracyWithinThreeEpochs) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_sync.yaml");
  EXPECT_EQ(result.consistency(), "sync");
  EXPECT_EQ(result.num_ps(), 2);
  EXPECT_EQ(result.num_workers(), 2);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
  EXPECT_GT(result.images_per_sec(), 0);
  EXPECT_EQ(result.ps_load().size(), 2u);
}

TEST(TrainingTest, AsyncMlpReachesTargetAccuracyWithinThreeEpochs) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_async.yaml");
  EXPECT_EQ(result.consistency(), "async");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
}

TEST(TrainingTest, AsyncWithFourWorkersReachesTargetAccuracy) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_async4.yaml");
  EXPECT_EQ(result.num_workers(), 4);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
}

TEST(TrainingTest, SspWithFourWorkersReachesTargetAccuracy) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_ssp4.yaml");
  EXPECT_EQ(result.consistency(), "ssp");
  EXPECT_EQ(result.staleness(), 2);
  EXPECT_EQ(result.num_workers(), 4);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
}

}  // namespace
}  // namespace pstrain::test
