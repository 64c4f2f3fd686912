// Runs that survive a dead process, as a user sees them: the shipped sync MLP
// through pstrain-launch --max_restarts 1, a role killed with SIGKILL in the
// middle, the launcher restarting it, and the run finishing at its target
// accuracy: a restarted PS shard makes the chief restore every shard from the
// newest valid checkpoint (the previous one when the newest is damaged); a
// restarted worker rejoins the running step.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/metrics/result_json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

namespace fs = std::filesystem;

class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override { UseConfig("configs/fashion_mnist_mlp_sync.yaml"); }

  // The shipped `config` (with `overrides`: top-level YAML lines) with
  // checkpoints every `every_steps` steps, recovery and a timeline.
  void UseConfig(const std::string& shipped, const std::string& overrides = "", int every_steps = 100) {
    config_ = dir_.path() + "/experiment.yaml";
    WriteFile(config_, absl::StrCat(WithOverrides(ReadFile(SourcePath(shipped)), overrides),
                                    "checkpoint:\n  dir: ", checkpoints_, "\n  every_steps: ", every_steps, "\n",
                                    "timeouts:\n  ps_recover_seconds: 60\n  worker_lost_seconds: 30\n",
                                    "timeline:\n  path: ", dir_.path(), "/timeline.json\n  start_step: 0\n",
                                    "  end_step: 2000\n"));
  }

  Subprocess Launch() {
    return Spawn({BinDir() + "/pstrain-launch", config_, "--run_dir", run_dir_, "--max_restarts", "1"}, dir_.path());
  }

  // Waits for the checkpoint of `step` to be committed.
  bool WaitForCheckpoint(int step) {
    return WaitUntil([&] { return fs::exists(absl::StrCat(checkpoints_, "/ckpt-", step, "/MANIFEST")); },
                     std::chrono::seconds(120));
  }

  void KillRole(const std::string& binary, int index) {
    const std::vector<pid_t> pids = FindProcesses({binary, absl::StrCat("--index=", index), run_dir_});
    ASSERT_EQ(pids.size(), 1u) << binary << " --index=" << index;
    ASSERT_EQ(kill(pids[0], SIGKILL), 0);
  }

  // Launches the run, kills `binary --index=<index>` with SIGKILL once the
  // checkpoint of `step` is committed (after `before_kill`, when given),
  // and returns the launcher's result; `out` gets everything it printed.
  RunResult RunKillingAfterCheckpoint(int step, const std::string& binary, int index, std::string* out,
                                      const std::function<void()>& before_kill = nullptr) {
    Subprocess launch = Launch();
    if (!WaitForCheckpoint(step)) {
      ADD_FAILURE() << "no checkpoint of step " << step << ":\n" << launch.out();
      kill(launch.pid, SIGTERM);
      WaitForExit(launch.pid, std::chrono::seconds(30));
      return RunResult{};
    }
    if (before_kill) before_kill();
    KillRole(binary, index);
    return Finish(launch, out);
  }
  RunResult RunKillingAtStep300(const std::string& binary, int index, std::string* out,
                                const std::function<void()>& before_kill = nullptr) {
    return RunKillingAfterCheckpoint(300, binary, index, out, before_kill);
  }

  // The launcher's exit and result.json; `out` gets everything it printed.
  RunResult Finish(Subprocess& launch, std::string* out) {
    std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
    *out = launch.out() + launch.err();
    EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *out;
    absl::StatusOr<RunResult> result = ReadResultJson(run_dir_ + "/result.json");
    EXPECT_TRUE(result.ok()) << result.status() << "\n" << *out;
    return result.ok() ? *result : RunResult{};
  }

  CheckpointManifest ReadManifest(int step) {
    CheckpointManifest manifest;
    EXPECT_TRUE(manifest.ParseFromString(ReadFile(absl::StrCat(checkpoints_, "/ckpt-", step, "/MANIFEST"))))
        << "ckpt-" << step;
    return manifest;
  }

  void ExpectValidTimeline(const std::string& path) {
    google::protobuf::ListValue events;
    const auto status = google::protobuf::util::JsonStringToMessage(ReadFile(path), &events);
    EXPECT_TRUE(status.ok()) << path << ": " << status.ToString();
    EXPECT_GT(events.values_size(), 100) << path;
  }

  TempDir dir_;
  std::string config_;
  std::string checkpoints_ = dir_.path() + "/ckpt";
  std::string run_dir_ = dir_.path() + "/run";
};

TEST_F(RecoveryTest, AKilledPsShardIsRestartedAndEveryShardRestoredFromTheLastCheckpoint) {
  std::string out;
  const RunResult result = RunKillingAtStep300("pstrain-ps", 1, &out);

  EXPECT_TRUE(absl::StrContains(out, "launch: ps1 was killed by signal 9 (Killed); restarted it (restart 1 of 1"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "waiting up to 1m (timeouts.ps_recover_seconds)")) << out;
  ASSERT_EQ(result.recoveries_size(), 1) << out;
  const int64_t step = result.recoveries(0).restored_step();
  EXPECT_GE(step, 300);
  EXPECT_EQ(step % 100, 0);
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("[worker0] Recovered: every PS shard restored from checkpoint ",
                                                  checkpoints_, "/ckpt-", step, " at step ", step)))
      << out;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("[worker1] worker 1: continuing from step ", step))) << out;
  EXPECT_TRUE(absl::StrContains(out, absl::StrCat("launch: recovered: restored step ", step, " after: "))) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: summary: test accuracy 0.8")) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: restarted: ps1 1x\n")) << out;
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85) << out;
  for (const WorkerReport& worker : result.workers()) EXPECT_EQ(worker.steps(), result.steps());
  ExpectValidTimeline(dir_.path() + "/timeline.json");
  ExpectValidTimeline(dir_.path() + "/timeline.worker1.json");
}

TEST_F(RecoveryTest, AKilledWorkerIsRestartedAndRejoinsTheRunningStep) {
  std::string out;
  const RunResult result = RunKillingAtStep300("pstrain-worker", 1, &out);

  EXPECT_TRUE(absl::StrContains(out, "launch: worker1 was killed by signal 9 (Killed); restarted it")) << out;
  EXPECT_TRUE(absl::StrContains(out, "[worker1] worker 1: rejoining the run at step ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "worker 1 rejoined (a new process)")) << out;  // each shard says so
  EXPECT_EQ(result.recoveries_size(), 0) << "a restarted worker needs no restore:\n" << out;
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85) << out;
}

TEST_F(RecoveryTest, AKilledAsyncWorkerRejoinsAfterItsLastPushedStep) {
  UseConfig("configs/fashion_mnist_mlp_async.yaml");
  std::string out;
  const RunResult result = RunKillingAtStep300("pstrain-worker", 1, &out);

  EXPECT_EQ(result.consistency(), "async");
  EXPECT_TRUE(absl::StrContains(out, "launch: worker1 was killed by signal 9 (Killed); restarted it")) << out;
  EXPECT_TRUE(absl::StrContains(out, "[worker1] worker 1: rejoining the run at step ")) << out;
  EXPECT_FALSE(absl::StrContains(out, "[worker1] worker 1: rejoining the run at step 0 ")) << out;
  ASSERT_TRUE(result.has_test_accuracy());
  // The four-worker async target of training_test: async accuracy depends
  // on the order the updates land in (0.8328 seen once here).
  EXPECT_GE(result.test_accuracy(), 0.83) << out;
}

TEST_F(RecoveryTest, ADamagedNewestCheckpointIsSkippedForThePreviousOneSayingWhy) {
  std::string out;
  const RunResult result = RunKillingAtStep300("pstrain-ps", 1, &out, [&] {
    const std::string damaged = checkpoints_ + "/ckpt-300/shard-0-of-2.ckpt";
    std::fstream file(damaged, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(file.good()) << damaged;
    file.seekp(200);
    file.put('\x5a');
  });

  ASSERT_EQ(result.recoveries_size(), 1) << out;
  // Unless a newer checkpoint was committed between the damage and the kill,
  // the restore went back to step 200, saying why.
  if (result.recoveries(0).restored_step() < 300) {
    EXPECT_EQ(result.recoveries(0).restored_step(), 200);
    EXPECT_TRUE(absl::StrContains(out, "checkpoint: skipping " + checkpoints_ + "/ckpt-300: ")) << out;
    EXPECT_TRUE(absl::StrContains(
        out, "Recovered: every PS shard restored from checkpoint " + checkpoints_ + "/ckpt-200 at step 200"))
        << out;
  } else {
    EXPECT_GT(result.recoveries(0).restored_step(), 300) << out;
  }
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85) << out;
}

// A click model (DLRM, 26 embedding tables) whose PS shard 1 is killed
// after two table increments: the restarted shard's rows come back from
// the whole checkpoint and the increments after it, and the sync run ends
// with the test AUC of the same run uninterrupted.
TEST_F(RecoveryTest, AKilledShardOfAClickModelRestoresItsRowsFromTableIncrements) {
  const std::string data =
      "data: {source: synthetic_ctr, ctr: {train_examples: 131072, test_examples: 16384, seed: 7, zipf_s: 1.8}}\n"
      "train: {batch_size_per_device: 512, epochs: 3, display_every: 50, eval_batch_size: 8192}\n";
  UseConfig("configs/dlrm_synthetic_sync.yaml", data, /*every_steps=*/50);
  std::string out;
  // Checkpoints 0 (recovery's first; no rows yet), 50 (every row), 100,
  // 150 and 200 (increments), 250 (every row), ...
  const RunResult killed = RunKillingAfterCheckpoint(150, "pstrain-ps", 1, &out, [&] {
    const CheckpointManifest whole = ReadManifest(50), increment = ReadManifest(150);
    ASSERT_EQ(whole.shards_size(), 2);
    ASSERT_EQ(increment.shards_size(), 2);
    for (int s = 0; s < 2; ++s) {
      EXPECT_EQ(whole.shards(s).tables_since_step(), 0);
      EXPECT_EQ(increment.shards(s).tables_since_step(), 100) << "shard " << s;
    }
  });
  ASSERT_EQ(killed.recoveries_size(), 1) << out;
  const int64_t step = killed.recoveries(0).restored_step();
  EXPECT_GE(step, 150) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: restarted: ps1 1x\n")) << out;
  ASSERT_TRUE(killed.has_test_auc()) << out;

  // The same run, uninterrupted (checkpoints do not change a sync run).
  UseConfig("configs/dlrm_synthetic_sync.yaml", data, /*every_steps=*/50);
  std::filesystem::remove_all(checkpoints_);
  std::filesystem::remove_all(run_dir_);
  Subprocess launch = Launch();
  const RunResult plain = Finish(launch, &out);
  ASSERT_TRUE(plain.has_test_auc()) << out;
  std::cout << "DLRM sync: test AUC " << killed.test_auc() << " with shard 1 killed after step " << step << ", "
            << plain.test_auc() << " uninterrupted" << std::endl;
  EXPECT_NEAR(killed.test_auc(), plain.test_auc(), 0.005);
  EXPECT_GT(plain.test_auc(), 0.7);
}

}  // namespace
}  // namespace pstrain::test
