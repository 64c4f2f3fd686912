// pstrain-compare as a real subprocess: a tiny matrix end to end through the
// real pstrain-launch (synthetic data, 20 steps), plus the failure paths with
// a fake launcher: a bad variant (exit 2, nothing runs), a failing variant
// (recorded, the rest still run, exit 1) and --dry_run.
#include <sys/wait.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics/result_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain::compare {
namespace {

namespace fs = std::filesystem;
using ::pstrain::test::BinDir;
using ::pstrain::test::Exists;
using ::pstrain::test::ReadFile;
using ::pstrain::test::Spawn;
using ::pstrain::test::Subprocess;
using ::pstrain::test::TempDir;
using ::pstrain::test::WaitForExit;
using ::pstrain::test::WriteExecutable;
using ::pstrain::test::WriteFile;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kBase[] = R"yaml(name: tiny
cluster:
  ps_hosts: ["localhost:2222"]
  worker_hosts: ["localhost:2223"]
model: {name: mlp, hidden_units: [16]}
data: {source: synthetic, synthetic_examples: 512}
optimizer: {name: sgd, learning_rate: 0.05}
train: {batch_size_per_device: 16, steps: 20, warmup_steps: 5, display_every: 10,
        evaluate: true, eval_batch_size: 256}
timeouts: {startup_seconds: 60, sync_step_seconds: 60}
)yaml";

constexpr char kMatrix[] = R"yaml(name: tiny_matrix
description: Two variants on synthetic data.
base: base.yaml
overrides: {train: {steps: 20}}
variants:
  - {label: "sync, 1 worker", workers: 1}
  - {label: "async, 2 workers", set: {consistency: async}, workers: 2, ps: 2}
)yaml";

struct CompareRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

CompareRun RunCompare(const std::vector<std::string>& args, const TempDir& capture,
                      std::chrono::seconds limit = std::chrono::seconds(300)) {
  std::vector<std::string> argv = {BinDir() + "/pstrain-compare"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess proc = Spawn(argv, capture.path());
  CompareRun run;
  const std::optional<int> status = WaitForExit(proc.pid, limit);
  if (status.has_value() && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  run.out = proc.out();
  run.err = proc.err();
  return run;
}

std::vector<std::string> Lines(const std::string& text) { return absl::StrSplit(text, '\n', absl::SkipEmpty()); }

TEST(CompareE2eTest, TinyMatrixThroughTheRealLauncher) {
  TempDir dir;
  WriteFile(dir / "base.yaml", kBase);
  WriteFile(dir / "matrix.yaml", kMatrix);
  const std::string out = dir / "out";
  const CompareRun run = RunCompare({dir / "matrix.yaml", "--out", out, "--timeout_s", "240"}, dir);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  // One status line per variant, then the table on stdout.
  EXPECT_THAT(run.out, ContainsRegex(R"(\[1/2\] sync, 1 worker +\.\.\. ok)"));
  EXPECT_THAT(run.out, ContainsRegex(R"(\[2/2\] async, 2 workers +\.\.\. ok)"));
  EXPECT_THAT(run.out, HasSubstr("| variant"));
  EXPECT_THAT(run.out, HasSubstr("sync, 1 worker (baseline)"));
  EXPECT_THAT(run.out, HasSubstr("parameter_server · async"));
  EXPECT_THAT(run.out, HasSubstr("2 × 1 cpu"));

  // Each run directory has the merged config and the run's result.json.
  for (const char* name : {"01-sync-1-worker", "02-async-2-workers"}) {
    const std::string run_dir = out + "/" + name;
    EXPECT_TRUE(Exists(run_dir + "/config.yaml")) << name;
    EXPECT_TRUE(Exists(run_dir + "/launch.log")) << name;
    absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->steps(), 20);
    EXPECT_GT(result->images_per_sec(), 0);
    EXPECT_TRUE(result->has_test_accuracy());
  }
  absl::StatusOr<RunResult> async = ReadResultJson(out + "/02-async-2-workers/result.json");
  ASSERT_TRUE(async.ok());
  EXPECT_EQ(async->consistency(), "async");
  EXPECT_EQ(async->num_workers(), 2);
  EXPECT_EQ(async->num_ps(), 2);
  EXPECT_EQ(async->experiment(), "tiny_matrix-async-2-workers");

  const std::vector<std::string> csv = Lines(ReadFile(out + "/results.csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_THAT(csv[0], HasSubstr("label,experiment,model"));
  EXPECT_THAT(
      csv[0],
      HasSubstr(
          ",speedup,scaling_efficiency,worker_peak_rss_bytes,precision,fp32_math,loss_scaling,overflow_steps,status"));
  EXPECT_THAT(csv[1], HasSubstr("\"sync, 1 worker\",tiny_matrix-sync-1-worker,mlp,"));
  // The baseline: speed-up 1, efficiency 1, then its worker's peak RSS, its
  // precision and loss scaling (none: no overflow count).
  EXPECT_THAT(csv[1], ::testing::ContainsRegex(",1,1,[1-9][0-9]*,fp32,strict,none,,ok,0,"));
  EXPECT_THAT(csv[2], ::testing::ContainsRegex(",[1-9][0-9]*,fp32,strict,none,,ok,0,"));

  const std::string md = ReadFile(out + "/results.md");
  EXPECT_THAT(md, HasSubstr("# Comparison: tiny_matrix"));
  EXPECT_THAT(md, HasSubstr("Two variants on synthetic data."));
  EXPECT_THAT(md, HasSubstr("| async, 2 workers"));
  EXPECT_TRUE(Exists(out + "/matrix.yaml"));
  EXPECT_TRUE(Exists(out + "/chart.gp"));
  if (Exists("/usr/bin/gnuplot") || Exists("/usr/local/bin/gnuplot")) {
    EXPECT_TRUE(Exists(out + "/chart.svg")) << run.err;
    EXPECT_TRUE(Exists(out + "/chart.png")) << run.err;
    EXPECT_THAT(md, HasSubstr("(chart.png)"));
  }
}

// Fashion-MNIST with its training labels shuffled (a fixed permutation), the
// other files linked: nothing to learn.
void WriteShuffledFashionMnist(const std::string& dir) {
  const std::string source = "/usr/share/datasets/fashion-mnist/";
  fs::create_directories(dir);
  for (const char* name : {"train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    fs::create_symlink(source + name, dir + "/" + name);
  }
  gzFile in = gzopen((source + "train-labels-idx1-ubyte.gz").c_str(), "rb");
  ASSERT_NE(in, nullptr);
  std::string labels(8 + 60000, '\0');
  ASSERT_EQ(gzread(in, labels.data(), static_cast<unsigned>(labels.size())), static_cast<int>(labels.size()));
  gzclose(in);
  std::mt19937 random(7);
  std::shuffle(labels.begin() + 8, labels.end(), random);
  gzFile out = gzopen((dir + "/train-labels-idx1-ubyte.gz").c_str(), "wb");
  ASSERT_NE(out, nullptr);
  ASSERT_EQ(gzwrite(out, labels.data(), static_cast<unsigned>(labels.size())), static_cast<int>(labels.size()));
  gzclose(out);
}

// The shipped sync MLP as it learns, with a learning rate of 0 (refused by
// the config check: nothing runs), 1e-9 (runs, learns nothing) and with its
// training labels shuffled; 300 steps each through the real launcher. The
// last two are flagged in their progress lines, their result.json, the
// table (with the reason under it) and the CSV; the first is not.
constexpr char kLearningMatrix[] = R"yaml(name: learning
base: PSTRAIN_SOURCE/configs/fashion_mnist_mlp_sync.yaml
overrides: {train: {steps: 300}}
variants:
  - {label: "lr 0.05"}
  - {label: "lr 1e-9", set: {optimizer: {learning_rate: 1e-9}}}
  - {label: "labels shuffled", set: {data: {path: SHUFFLED}}}
)yaml";

TEST(CompareE2eTest, ARunMadeNotToLearnIsFlaggedEverywhere) {
  TempDir dir;
  WriteShuffledFashionMnist(dir / "shuffled");
  std::string matrix = kLearningMatrix;
  matrix.replace(matrix.find("PSTRAIN_SOURCE"), 14, PSTRAIN_TEST_SOURCE_DIR);
  matrix.replace(matrix.find("SHUFFLED"), 8, dir / "shuffled");
  std::string zero = matrix;
  zero.replace(zero.find("1e-9}"), 4, "0");
  WriteFile(dir / "zero.yaml", zero);
  const CompareRun refused = RunCompare({dir / "zero.yaml", "--out", dir / "zero"}, dir);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("field 'optimizer.learning_rate': expected a number > 0, got 0"));

  WriteFile(dir / "matrix.yaml", matrix);
  const std::string out = dir / "out";
  const CompareRun run = RunCompare({dir / "matrix.yaml", "--out", out, "--timeout_s", "240"}, dir);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* flagged : {"02-lr-1e-9", "03-labels-shuffled"}) {
    const std::string log = ReadFile(out + "/" + flagged + "/launch.log");
    EXPECT_THAT(log, HasSubstr("[worker0] WARNING: worker 0: not learning: training loss")) << log;
    EXPECT_THAT(log, HasSubstr("over steps 150-199")) << log;
    EXPECT_THAT(log, HasSubstr("launch: WARNING: worker 0: not learning")) << log;
    absl::StatusOr<RunResult> flat = ReadResultJson(out + "/" + flagged + "/result.json");
    ASSERT_TRUE(flat.ok()) << flat.status();
    ASSERT_GE(flat->warnings_size(), 2) << "both workers' checks (and the chief's, when its accuracy is at chance)";
    EXPECT_THAT(flat->warnings(0), HasSubstr("worker 0: not learning"));
    EXPECT_THAT(flat->warnings(1), HasSubstr("worker 1: not learning"));
  }
  const std::string log = ReadFile(out + "/03-labels-shuffled/launch.log");
  EXPECT_THAT(log, HasSubstr("[worker0] WARNING: chief: not learning: test accuracy")) << log;
  absl::StatusOr<RunResult> learned = ReadResultJson(out + "/01-lr-0-05/result.json");
  ASSERT_TRUE(learned.ok()) << learned.status();
  EXPECT_EQ(learned->warnings_size(), 0);
  EXPECT_LT(learned->final_loss(), 0.5 * learned->initial_loss());

  const std::string md = ReadFile(out + "/results.md");
  EXPECT_THAT(md, ContainsRegex(R"(\| lr 1e-9 +\|.*% ! \|)")) << md;
  EXPECT_THAT(md, ContainsRegex(R"(\| labels shuffled +\|.*% ! \|)")) << md;
  for (const std::string& line : Lines(md)) {
    if (line.find("| lr 0.05 (baseline)") == 0) {
      EXPECT_THAT(line, Not(HasSubstr("!"))) << line;
    }
  }
  EXPECT_THAT(md, HasSubstr("**!** lr 1e-9: worker 0: not learning")) << md;
  EXPECT_THAT(md, HasSubstr("**!** labels shuffled: chief: not learning: test accuracy")) << md;
  const std::vector<std::string> csv = Lines(ReadFile(out + "/results.csv"));
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_THAT(csv[0], ::testing::EndsWith(",warnings"));
  EXPECT_THAT(csv[1], ::testing::EndsWith(","));
  EXPECT_THAT(csv[2], HasSubstr("worker 0: not learning"));
  EXPECT_THAT(csv[3], HasSubstr("worker 0: not learning"));
}

// A fake pstrain-launch: notes its arguments in OUT/launched, fails configs
// whose consistency is async, and for the others writes a result.json as
// the chief would.
constexpr char kFakeLaunch[] = R"sh(#!/bin/sh
CONFIG="$1"; RUN_DIR=""; ARGS="$*"
while [ $# -gt 0 ]; do
  case "$1" in --run_dir) RUN_DIR="$2"; shift ;; esac
  shift
done
echo "launch: 2 PS and 2 workers from $CONFIG; run dir $RUN_DIR"
echo "$ARGS" >> "$(dirname "$RUN_DIR")/launched"
if grep -q '^consistency: async' "$CONFIG"; then
  echo "[worker1] F boom"
  echo "launch: failed: worker1 exited with code 1; logs in $RUN_DIR"
  exit 1
fi
cat > "$RUN_DIR/result.json" <<EOF
{"experiment": "fake", "model": "mlp", "variable_update": "parameter_server",
 "local_parameter_device": "cpu", "all_reduce_spec": "", "consistency": "sync",
 "staleness": 0, "transport": "grpc", "num_ps": 1, "num_workers": 1, "devices_per_worker": 1,
 "device": "cpu", "batch_size_per_device": 16, "global_batch_size": 16, "steps": 20,
 "images_per_sec": 1000, "images_per_sec_stddev": 10, "final_loss": 0.5,
 "test_accuracy": null, "wall_seconds": 1}
EOF
exit 0
)sh";

class FakeLaunchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(bin_ / "");
    WriteExecutable(bin_ / "pstrain-launch", kFakeLaunch);
    WriteFile(dir_ / "base.yaml", kBase);
  }
  TempDir dir_;
  TempDir bin_;
};

TEST_F(FakeLaunchTest, AFailedVariantIsRecordedAndTheOthersStillRun) {
  WriteFile(dir_ / "m.yaml", R"yaml(base: base.yaml
variants:
  - {label: first}
  - {label: broken, set: {consistency: async}, workers: 2}
  - {label: third}
)yaml");
  const std::string out = dir_ / "out";
  const CompareRun run = RunCompare({dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path()}, dir_);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.out, ContainsRegex(R"(\[1/3\] first +\.\.\. ok)"));
  EXPECT_THAT(run.out, HasSubstr("broken ... FAILED (exit 1): failed: worker1 exited with code 1; "
                                 "logs in "));
  EXPECT_THAT(run.out, ContainsRegex(R"(\[3/3\] third +\.\.\. ok)"));
  EXPECT_THAT(run.out, HasSubstr("failed (exit 1)"));
  EXPECT_THAT(run.err, HasSubstr("1 variant failed"));
  const std::vector<std::string> csv = Lines(ReadFile(out + "/results.csv"));
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_THAT(csv[2], HasSubstr("broken,,,"));
  EXPECT_THAT(csv[2], HasSubstr(",failed,1,"));
  EXPECT_THAT(csv[3], HasSubstr(",ok,0,"));
  EXPECT_THAT(ReadFile(out + "/results.md"), HasSubstr("## Failed variants"));
}

// The matrix's byte_scale goes to the launches of emulated variants only;
// --byte_scale overrides it; one out of range runs nothing.
TEST_F(FakeLaunchTest, TheByteScaleGoesToTheEmulatedVariants) {
  WriteFile(dir_ / "m.yaml", R"yaml(base: base.yaml
byte_scale: 4
variants:
  - {label: cpu}
  - {label: emulated, set: {device: emulated, emulation: {images_per_second: 100}, train: {evaluate: false}}}
)yaml");
  const std::string out = dir_ / "out";
  const CompareRun run = RunCompare({dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path()}, dir_);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  std::vector<std::string> launched = Lines(ReadFile(out + "/launched"));
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_THAT(launched[0], Not(HasSubstr("--byte_scale")));
  EXPECT_THAT(launched[1], HasSubstr("--byte_scale 4"));
  const std::string again = dir_ / "again";
  const CompareRun overridden =
      RunCompare({dir_ / "m.yaml", "--out", again, "--bin_dir", bin_.path(), "--byte_scale", "2"}, dir_);
  ASSERT_EQ(overridden.exit_code, 0) << overridden.out << overridden.err;
  launched = Lines(ReadFile(again + "/launched"));
  ASSERT_EQ(launched.size(), 2u);
  EXPECT_THAT(launched[1], HasSubstr("--byte_scale 2"));
  WriteFile(dir_ / "bad.yaml", "base: base.yaml\nbyte_scale: 0.5\nvariants: [{label: one}]\n");
  const CompareRun refused = RunCompare({dir_ / "bad.yaml", "--out", dir_ / "bad", "--bin_dir", bin_.path()}, dir_);
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("field 'byte_scale': expected a number in [1, 1000], got 0.5"));
  EXPECT_FALSE(Exists(dir_ / "bad/launched"));
}

TEST_F(FakeLaunchTest, BadVariantExitsTwoAndRunsNothing) {
  WriteFile(dir_ / "m.yaml", R"yaml(base: base.yaml
variants:
  - {label: fine}
  - {label: "bad momentum", set: {optimizer: {name: momentum, momentum: 1.5}}}
)yaml");
  const std::string out = dir_ / "out";
  const CompareRun run = RunCompare({dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path()}, dir_);
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr(dir_ / "m.yaml"));
  EXPECT_THAT(run.err, HasSubstr("variant 'bad momentum'"));
  EXPECT_THAT(run.err, HasSubstr("'optimizer.momentum'"));
  EXPECT_THAT(run.err, HasSubstr("nothing was run"));
  EXPECT_FALSE(Exists(out + "/launched"));
  EXPECT_FALSE(Exists(out + "/results.csv"));
  EXPECT_TRUE(Exists(out + "/02-bad-momentum/config.yaml"));
}

TEST_F(FakeLaunchTest, MalformedMatrixExitsTwo) {
  WriteFile(dir_ / "m.yaml", "base: base.yaml\nvariants: [{label: a, wrokers: 2}]\n");
  const CompareRun run = RunCompare({dir_ / "m.yaml", "--out", dir_ / "out", "--bin_dir", bin_.path()}, dir_);
  EXPECT_EQ(run.exit_code, 2);
  // The config loader's message: file, line, field, a hint and the valid keys.
  EXPECT_THAT(run.err, HasSubstr(dir_ / "m.yaml:2: unknown field 'variants[0].wrokers' (did you mean 'workers'?); "
                                        "the valid keys of 'variants[0]' (ComparisonVariant) are: label, set, "
                                        "workers, ps"));
  EXPECT_FALSE(Exists(dir_ / "out/launched"));
}

TEST_F(FakeLaunchTest, DryRunValidatesAndRunsNothing) {
  WriteFile(dir_ / "m.yaml", "base: base.yaml\nvariants: [{label: a}, {label: b, workers: 4}]\n");
  const std::string out = dir_ / "out";
  const CompareRun run = RunCompare({dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path(), "--dry_run"}, dir_);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("[2/2] b: parameter_server, sync, 1 PS, 4 workers"));
  EXPECT_THAT(run.out, HasSubstr("nothing was run"));
  EXPECT_TRUE(Exists(out + "/02-b/config.yaml"));
  EXPECT_FALSE(Exists(out + "/launched"));
}

TEST_F(FakeLaunchTest, MissingGnuplotIsAWarningUnlessRequired) {
  WriteFile(dir_ / "m.yaml", "base: base.yaml\nvariants: [{label: a}]\n");
  const std::string out = dir_ / "out";
  CompareRun run =
      RunCompare({dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path(), "--gnuplot", "/nonexistent/gnuplot"}, dir_);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("warning: no chart: gnuplot not found"));
  EXPECT_TRUE(Exists(out + "/results.csv"));
  EXPECT_TRUE(Exists(out + "/results.md"));
  EXPECT_THAT(ReadFile(out + "/results.md"), Not(HasSubstr("chart.png")));
  run = RunCompare(
      {dir_ / "m.yaml", "--out", out, "--bin_dir", bin_.path(), "--gnuplot", "/nonexistent/gnuplot", "--require_chart"},
      dir_);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("error: no chart"));
}

}  // namespace
}  // namespace pstrain::compare
