// The shipped experiments train to their targets through pstrain-launch, as a
// user runs them: real processes, real gRPC (or UCX, or Open MPI) on
// loopback, real Fashion-MNIST.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/data/criteo/criteo_reader.h"
#include "common/data/criteo/synthetic_ctr.h"
#include "common/metrics/result_json.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain::test {
namespace {

// Runs the shipped `config` through pstrain-launch, with `overrides` (YAML
// lines of top-level fields) applied when given.
RunResult LaunchAndRead(const std::string& config, const std::string& overrides = "") {
  TempDir dir;
  const std::string run_dir = dir.path() + "/run";
  std::string path = SourcePath(config);
  if (!overrides.empty()) {
    path = dir.path() + "/experiment.yaml";
    WriteFile(path, WithOverrides(ReadFile(SourcePath(config)), overrides));
  }
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", path, "--run_dir", run_dir}, dir.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
  EXPECT_TRUE(status.has_value()) << "pstrain-launch did not finish in 5 minutes";
  EXPECT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "launch failed:\n"
                                                                         << launch.out() << launch.err();
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  EXPECT_TRUE(result.ok()) << result.status() << "\n" << launch.out();
  return result.ok() ? *result : RunResult{};
}

// Every CPU worker reports its peak RSS, which holds at least its model's
// step arena (the same for all: one model, one batch size), and no GPU memory.
void ExpectMemoryReported(const RunResult& result) {
  ASSERT_GE(result.workers_size(), 2);
  for (const WorkerReport& w : result.workers()) {
    EXPECT_GT(w.step_arena_bytes(), 0) << "worker " << w.worker();
    EXPECT_EQ(w.step_arena_bytes(), result.workers(0).step_arena_bytes()) << "worker " << w.worker();
    EXPECT_GT(w.peak_rss_bytes(), w.step_arena_bytes()) << "worker " << w.worker();
    EXPECT_EQ(w.peak_device_bytes(), 0) << "worker " << w.worker();
  }
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
  ExpectMemoryReported(result);
}

TEST(TrainingTest, AsyncMlpReachesTargetAccuracyWithinThreeEpochs) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_async.yaml");
  EXPECT_EQ(result.consistency(), "async");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
}

// Four async workers apply their updates in the order the machine runs
// them: 0.8106-0.8482 over 28 runs on a 2-core AMD EPYC VM (14 with pulls
// lent through the lane, mean 0.834; 14 copied, mean 0.837), so the target
// sits below that spread; training that does not learn stays far under it
// (chance: 0.10).
TEST(TrainingTest, AsyncWithFourWorkersReachesTargetAccuracy) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_async4.yaml");
  EXPECT_EQ(result.num_workers(), 4);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.80);
}

TEST(TrainingTest, SspWithFourWorkersReachesTargetAccuracy) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_ssp4.yaml");
  EXPECT_EQ(result.consistency(), "ssp");
  EXPECT_EQ(result.staleness(), 2);
  EXPECT_EQ(result.num_workers(), 4);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
}

// Bytes of every variable: what one float32 push of all gradients carries.
int64_t VariableBytes(const RunResult& result) {
  int64_t bytes = 0;
  for (const ShardLoad& load : result.ps_load()) bytes += load.variable_bytes();
  return bytes;
}

// The sync MLP as it ships, over the RDMA path's transport.
TEST(TrainingTest, SyncMlpOverUcxReachesTargetAccuracy) {
  if (!TransportRegistry().Contains("ucx")) GTEST_SKIP() << "built without UCX";
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_sync.yaml", "transport: ucx");
  EXPECT_EQ(result.transport(), "ucx");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
}

// 16-bit pushes and pulls: the same accuracy for exactly half the bytes of
// float32 (steps x variable bytes / 2 per worker each way).
class CompressedSyncTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CompressedSyncTest, HalfTheBytesAndTheTargetAccuracy) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_sync.yaml", "compression: " + GetParam());
  EXPECT_EQ(result.compression(), GetParam());
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
  const int64_t float32_push = VariableBytes(result);
  ASSERT_GT(float32_push, 0);
  ASSERT_EQ(result.workers_size(), 2);
  int64_t shard_bytes_in = 0;
  for (const ShardLoad& load : result.ps_load()) shard_bytes_in += load.bytes_in();
  for (const WorkerReport& w : result.workers()) {
    EXPECT_EQ(w.bytes_pushed(), result.steps() * float32_push / 2) << "worker " << w.worker();
    // A whole 16-bit model each step, and the join's first read: whole, or
    // the part of the shards that had the chief's values when it asked.
    EXPECT_GE(w.bytes_pulled(), result.steps() * float32_push / 2) << "worker " << w.worker();
    EXPECT_LE(w.bytes_pulled(), (result.steps() + 1) * float32_push / 2) << "worker " << w.worker();
  }
  // The shards received the chief's float32 init and every 16-bit push.
  EXPECT_EQ(shard_bytes_in, float32_push + 2 * result.steps() * float32_push / 2);
}

INSTANTIATE_TEST_SUITE_P(Encodings, CompressedSyncTest, ::testing::Values("fp16", "bf16"),
                         [](const auto& info) { return info.param; });

// Top-k at 1% with error feedback: close to the uncompressed accuracy with
// about 2% of the pushed bytes (an index beside each value sent).
TEST(TrainingTest, TopKOnePercentWithErrorFeedbackReachesTarget) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_sync.yaml", "compression: topk\ntopk_ratio: 0.01");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.84);
  const int64_t float32_pushes = result.steps() * VariableBytes(result);
  for (const WorkerReport& w : result.workers()) {
    EXPECT_GT(w.bytes_pushed(), 0);
    EXPECT_LE(w.bytes_pushed(), float32_pushes * 25 / 1000) << "worker " << w.worker();
  }
}

// All-reduce over Gloo with 16-bit buffers.
TEST(TrainingTest, AllReduceWithFp16ReachesTarget) {
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_allreduce.yaml", "compression: fp16");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
  ASSERT_EQ(result.workers_size(), 2);
  EXPECT_EQ(result.workers(0).bytes_allreduced(), result.workers(1).bytes_allreduced());
  EXPECT_GT(result.workers(0).bytes_allreduced(), 0);
  ExpectMemoryReported(result);  // the other worker's through the report table
}

// The workers as the ranks of one mpirun, which pstrain-launch starts.
TEST(TrainingTest, AllReduceOverMpiReachesTarget) {
  if (!absl::StrContains(ReadFile(SourcePath("configs/fashion_mnist_mlp_allreduce_mpi.yaml")), "collective: mpi")) {
    FAIL() << "the shipped mpi config changed";
  }
  TempDir probe;
  Subprocess check =
      Spawn({BinDir() + "/pstrain-worker", "--config=" + SourcePath("configs/fashion_mnist_mlp_allreduce_mpi.yaml"),
             "--index=0", "--check_config"},
            probe.path());
  std::optional<int> checked = WaitForExit(check.pid, std::chrono::seconds(30));
  if (checked && WIFEXITED(*checked) && WEXITSTATUS(*checked) == 2 &&
      absl::StrContains(check.err(), "built without Open MPI")) {
    GTEST_SKIP() << "built without Open MPI";
  }
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_allreduce_mpi.yaml");
  EXPECT_EQ(result.collective(), "mpi");
  EXPECT_EQ(result.num_workers(), 2);
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
}

// Under mpirun every progress line comes out whole, as the rank's own
// ("[worker1] 300\timages/sec: ..."), and the launcher counts the ranks.
TEST(TrainingTest, MpirunRanksPrintWholeLinesUnderTheirNames) {
  TempDir dir;
  const std::string config = SourcePath("configs/fashion_mnist_mlp_allreduce_mpi.yaml");
  Subprocess check = Spawn({BinDir() + "/pstrain-worker", "--config=" + config, "--check_config"}, dir.path());
  std::optional<int> checked = WaitForExit(check.pid, std::chrono::seconds(30));
  if (checked && WIFEXITED(*checked) && WEXITSTATUS(*checked) == 2 &&
      absl::StrContains(check.err(), "built without Open MPI")) {
    GTEST_SKIP() << "built without Open MPI";
  }
  TempDir run;
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", config, "--run_dir", run.path() + "/run"}, run.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.out() << launch.err();
  const std::string out = launch.out();
  int progress[2] = {0, 0};
  const std::regex whole(R"(\[worker([01])\] [0-9]+\timages/sec: [0-9.]+ \+/- [0-9.]+ \(jitter = [0-9.]+\)\t[0-9.]+)");
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(out, '\n'))) {
    if (!absl::StrContains(line, "\timages/sec: ")) continue;  // a progress line (tf_cnn_benchmarks' tab)
    std::smatch rank;
    ASSERT_TRUE(std::regex_match(line, rank, whole)) << "not a whole progress line of one rank: " << line;
    ++progress[rank[1] == "1" ? 1 : 0];
  }
  EXPECT_GE(progress[0], 10) << out;
  EXPECT_EQ(progress[0], progress[1]) << out;
  EXPECT_TRUE(absl::StrContains(out, "launch: all 2 roles finished (the workers as the ranks of one mpirun)")) << out;
  EXPECT_FALSE(absl::StrContains(out, "<stdout>:")) << out;
}

// The async MLP as a user runs it: the launcher's final loss is the one
// docs/RESULTS.md defines (result.json's, the workers' mean of their last 10
// steps' means) and says so; every "+/-" printed says what it is.
TEST(TrainingTest, AsyncMlpSummarySaysWhatItsFiguresAre) {
  TempDir dir;
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", SourcePath("configs/fashion_mnist_mlp_async.yaml"),
                             "--run_dir", dir.path() + "/run"},
                            dir.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(5));
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.out() << launch.err();
  absl::StatusOr<RunResult> result = ReadResultJson(dir.path() + "/run/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->workers_size(), 2);
  const double mean = (result->workers(0).final_loss() + result->workers(1).final_loss()) / 2;
  EXPECT_NEAR(result->final_loss(), mean, 1e-12);
  const std::string out = launch.out();
  EXPECT_TRUE(absl::StrContains(
      out, absl::StrFormat("| final loss %.4f (the workers' mean over their last 10 steps) |", result->final_loss())))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "[worker0] Step\tImg/sec +/- its standard error (jitter = robust spread)")) << out;
  // The config leaves fp32_math at its default (TF32 convolutions); CPUs
  // have no TF32, and the header and result.json say what ran.
  EXPECT_TRUE(absl::StrContains(out, "[worker0] Precision:   fp32 (strict)\n")) << out;
  EXPECT_EQ(result->fp32_math(), "strict");
  EXPECT_TRUE(absl::StrContains(out, absl::StrFormat("[worker0] total images/sec: %.2f +/- %.2f (std. dev.; 2 workers",
                                                     result->images_per_sec(), result->images_per_sec_stddev())))
      << out;
}

// The shipped sync MLP with `overrides`, checked by pstrain-worker
// --check_config as a launcher would (under `env`, NAME=VALUE pairs set for
// the check only): its exit status (-1 when it did not end in 30 s) and
// standard error.
std::pair<int, std::string> CheckWorkerConfig(const std::string& overrides,
                                              const std::vector<std::pair<std::string, std::string>>& env = {}) {
  TempDir dir;
  const std::string path = dir.path() + "/experiment.yaml";
  WriteFile(path, WithOverrides(ReadFile(SourcePath("configs/fashion_mnist_mlp_sync.yaml")), overrides));
  for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
  Subprocess check =
      Spawn({BinDir() + "/pstrain-worker", "--config=" + path, "--index=0", "--check_config"}, dir.path());
  for (const auto& [name, value] : env) unsetenv(name.c_str());
  std::optional<int> status = WaitForExit(check.pid, std::chrono::seconds(30));
  const int code = status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  return {code, check.err()};
}

// Mixed precision on the CPU: the MLP's dense layers compute in bf16, the
// variables and optimizer stay float32. Where the processor lacks bf16 the
// worker's own check says so, and the test skips with its words.
TEST(TrainingTest, SyncMlpInBf16ReachesTargetAccuracy) {
  const auto [code, err] = CheckWorkerConfig("precision: bf16");
  if (code == 2 && absl::StrContains(err, "needs a processor with AVX-512 BF16")) GTEST_SKIP() << err;
  ASSERT_EQ(code, 0) << err;
  RunResult result = LaunchAndRead("configs/fashion_mnist_mlp_sync.yaml", "precision: bf16");
  ASSERT_TRUE(result.has_test_accuracy());
  EXPECT_GE(result.test_accuracy(), 0.85);
  std::cout << "sync MLP in bf16: test accuracy " << result.test_accuracy() << std::endl;
}

// A processor without bf16 (here: oneDNN held to AVX2 by ONEDNN_MAX_CPU_ISA)
// refuses the config before anything starts, naming the field and what the
// processor has; fp16 on the CPU and unknown names are refused too.
TEST(TrainingTest, PrecisionsTheWorkerCannotRunAreRefusedAtTheConfigCheck) {
  const auto [code, err] = CheckWorkerConfig("precision: bf16", {{"ONEDNN_MAX_CPU_ISA", "AVX2"}});
  EXPECT_EQ(code, 2) << err;
  EXPECT_TRUE(absl::StrContains(err, "field 'precision'")) << err;
  EXPECT_TRUE(absl::StrContains(err, "needs a processor with AVX-512 BF16 or AMX")) << err;
  EXPECT_TRUE(absl::StrContains(err, "AVX2")) << err;

  const auto [fp16_code, fp16_err] = CheckWorkerConfig("precision: fp16");
  EXPECT_EQ(fp16_code, 2) << fp16_err;
  EXPECT_TRUE(absl::StrContains(fp16_err, "fp16 runs on GPUs only")) << fp16_err;

  const auto [bad_code, bad_err] = CheckWorkerConfig("precision: fp8");
  EXPECT_EQ(bad_code, 2) << bad_err;
  EXPECT_TRUE(absl::StrContains(bad_err, "one of fp32, bf16, fp16, got 'fp8'")) << bad_err;
}

// ---- Click models: embedding tables on the shards (docs/EMBEDDINGS.md) ----

// The shipped DLRM configs on a smaller synthetic set, 2 PS + 2 workers:
// the chief's test AUC comes near the best the data allows, and every shard
// reports the rows it holds and its memory.
class DlrmTrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DlrmTrainingTest, ReachesAnAucNearThePlantedOne) {
  const std::string mode = GetParam();
  RunResult result = LaunchAndRead(
      absl::StrCat("configs/dlrm_synthetic_", mode, ".yaml"),
      "data: {source: synthetic_ctr, ctr: {train_examples: 262144, test_examples: 16384, seed: 7, zipf_s: 1.8}}\n"
      "train: {batch_size_per_device: 512, epochs: 3, display_every: 100, eval_batch_size: 8192}\n");
  EXPECT_EQ(result.consistency(), mode);
  ASSERT_TRUE(result.has_test_auc() && result.has_planted_auc()) << "no AUC in result.json";
  std::cout << "DLRM " << mode << ": test AUC " << result.test_auc() << ", planted " << result.planted_auc()
            << std::endl;
  EXPECT_GT(result.test_auc(), 0.7);
  EXPECT_LT(result.planted_auc() - result.test_auc(), 0.03);  // a quarter of the shipped run's data
  ASSERT_EQ(result.ps_load_size(), 2);
  for (const ShardLoad& shard : result.ps_load()) {
    EXPECT_GT(shard.table_rows(), 1000) << "shard " << shard.shard();
    EXPECT_GT(shard.table_bytes(), shard.table_rows() * 16 * 4) << "shard " << shard.shard();
    EXPECT_GT(shard.peak_rss_bytes(), shard.table_bytes()) << "shard " << shard.shard();
  }
}

INSTANTIATE_TEST_SUITE_P(Consistency, DlrmTrainingTest, ::testing::Values("sync", "async"),
                         [](const auto& info) { return info.param; });

// Criteo-format files (missing values included) written here from the
// synthetic generator train a click model; a malformed line stops the run
// naming its file and line.
class CriteoFilesTest : public ::testing::Test {
 protected:
  static criteo::SyntheticCtr Generator() {
    criteo::SyntheticCtrOptions options;
    options.seed = 3;
    options.cardinalities.assign(criteo::kNumCategorical, 200);
    options.zipf_s = 1.5;
    options.categorical_missing = 0.05;
    absl::StatusOr<criteo::SyntheticCtr> generator = criteo::SyntheticCtr::Create(options);
    CHECK(generator.ok()) << generator.status();
    return *std::move(generator);
  }
  // `count` examples from index `first` as Criteo lines.
  static std::string Lines(uint64_t first, uint64_t count) {
    std::string text;
    for (const criteo::CtrExample& e : Generator().Generate(first, count)) {
      absl::StrAppend(&text, criteo::FormatCriteoLine(e.record), "\n");
    }
    return text;
  }

  std::string Overrides() const {
    return absl::StrCat("data: {source: criteo, path: \"", dir_.path(), "\", train_files: \"train-*\", ",
                        "eval_files: \"test-*\"}\n",
                        "train: {batch_size_per_device: 512, epochs: 3, display_every: 50, eval_batch_size: 4096}\n");
  }

  TempDir dir_;
};

TEST_F(CriteoFilesTest, FilesWithMissingValuesTrain) {
  const std::string train = Lines(0, 65536), test = Lines(65536, 8192);
  ASSERT_TRUE(absl::StrContains(train, "\t\t")) << "no missing value in the file";
  WriteFile(dir_.path() + "/train-0", train);
  WriteFile(dir_.path() + "/test-0", test);
  RunResult result = LaunchAndRead("configs/dlrm_synthetic_async.yaml", Overrides());
  ASSERT_TRUE(result.has_test_auc());
  EXPECT_FALSE(result.has_planted_auc());  // files carry no planted model
  absl::StatusOr<double> planted = Generator().PlantedAuc(65536, 8192);
  ASSERT_TRUE(planted.ok()) << planted.status();
  std::cout << "DLRM on Criteo files: test AUC " << result.test_auc() << ", planted " << *planted << std::endl;
  // 0.723 of 0.798 when written: most of what is above chance (64K
  // examples; the shipped configs' million come within 0.01).
  EXPECT_GT(result.test_auc() - 0.5, 0.6 * (*planted - 0.5));
}

TEST_F(CriteoFilesTest, AMalformedLineStopsTheRunNamingFileAndLine) {
  std::string train = Lines(0, 2048);
  train += "1\tnot-a-number\n";  // line 2049
  WriteFile(dir_.path() + "/train-0", train);
  WriteFile(dir_.path() + "/test-0", Lines(2048, 512));
  TempDir run;
  const std::string path = run.path() + "/experiment.yaml";
  WriteFile(path, WithOverrides(ReadFile(SourcePath("configs/dlrm_synthetic_async.yaml")), Overrides()));
  Subprocess launch = Spawn({BinDir() + "/pstrain-launch", path, "--run_dir", run.path() + "/run"}, run.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(2));
  ASSERT_TRUE(status.has_value());
  EXPECT_FALSE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.out();
  EXPECT_TRUE(absl::StrContains(launch.out() + launch.err(), "train-0:2049")) << launch.out() << launch.err();
}

}  // namespace
}  // namespace pstrain::test
