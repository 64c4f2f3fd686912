// configs/fashion_mnist_lenet_sync.yaml trains to its target through
// pstrain-launch, as a user runs it: 2 PS + 2 workers as real processes over
// gRPC on loopback, real Fashion-MNIST, 3 epochs, >= 0.89 test accuracy.
// About 3 minutes on the 2-core reference machine (167-209 s measured).
#include <sys/wait.h>

#include <iostream>
#include <string>

#include "common/metrics/result_json.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

TEST(LenetFashionMnistTest, SyncLenetReachesTargetAccuracyWithinThreeEpochs) {
  TempDir dir;
  const std::string run_dir = dir.path() + "/run";
  Subprocess launch =
      Spawn({BinDir() + "/pstrain-launch", SourcePath("configs/fashion_mnist_lenet_sync.yaml"), "--run_dir", run_dir},
            dir.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(9));
  ASSERT_TRUE(status.has_value()) << "pstrain-launch did not finish in 9 minutes";
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "launch failed:\n" << launch.out() << launch.err();
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << launch.out();
  EXPECT_EQ(result->model(), "lenet");
  EXPECT_EQ(result->consistency(), "sync");
  EXPECT_EQ(result->num_ps(), 2);
  EXPECT_EQ(result->num_workers(), 2);
  ASSERT_TRUE(result->has_test_accuracy());
  EXPECT_GE(result->test_accuracy(), 0.89);
  RecordProperty("test_accuracy", std::to_string(result->test_accuracy()));
  RecordProperty("wall_seconds", std::to_string(result->wall_seconds()));
  std::cout << "lenet sync: test_accuracy " << result->test_accuracy() << ", " << result->wall_seconds() << " s, "
            << result->images_per_sec() << " images/sec" << std::endl;
}

}  // namespace
}  // namespace pstrain::test
