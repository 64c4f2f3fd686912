// A run made input-bound on purpose -- large PNG images (no reduced-scale
// decoding), one decode thread, one batch prefetched, a tiny model -- is
// named so: its workers' result.json entries carry the share of the run
// spent waiting for input, above the 10% threshold, and pstrain-compare's
// table marks the row. The margin is wide (decoding a batch takes hundreds
// of times the model's step), so the verdict does not hang on the machine's
// speed.
#include <sys/wait.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "common/data/image/codec.h"
#include "common/data/records/image_example.h"
#include "common/data/records/record_writer.h"
#include "common/metrics/result_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/util/process_test_util.h"
#include "tools/compare/report.h"

namespace pstrain::test {
namespace {

using ::testing::HasSubstr;

// 16 noisy 1200 x 900 PNGs of two classes into dir/train-00000-of-00001.
void WriteLargePngs(const std::string& dir) {
  absl::StatusOr<data::RecordFileWriter> writer = data::RecordFileWriter::CreateNew(dir + "/train-00000-of-00001");
  ASSERT_TRUE(writer.ok()) << writer.status();
  image::Image img;
  img.width = 1200;
  img.height = 900;
  img.channels = 3;
  img.pixels.resize(static_cast<size_t>(img.width) * img.height * 3);
  uint32_t x = 12345;
  for (int i = 0; i < 16; ++i) {
    for (uint8_t& p : img.pixels) {
      x = x * 1664525u + 1013904223u;  // noise: PNG cannot compress it away
      p = static_cast<uint8_t>(x >> 24);
    }
    absl::StatusOr<std::string> png = image::EncodePng(img);
    ASSERT_TRUE(png.ok()) << png.status();
    data::ImageExample e;
    e.encoded = *png;
    e.label = i % 2;
    ASSERT_TRUE(writer->Write(data::SerializeImageExample(e)).ok());
  }
  ASSERT_TRUE(writer->Close().ok());
}

TEST(InputBoundTest, ARunWaitingForItsDecoderIsFlaggedInResultJsonAndByCompare) {
  TempDir dir;
  WriteLargePngs(dir.path());
  const std::string config = absl::StrCat(R"(
name: input_bound
cluster: {worker_hosts: [")",
                                          NthHost(FreeLoopbackHosts(1), 0), R"("]}
model: {name: mlp, hidden_units: [8], input_shape: [3, 32, 32], num_classes: 2}
data: {source: tfrecord, path: ")",
                                          dir.path(), R"(", augmentation: resize, normalization: none,
       decode_threads: 1, prefetch_batches: 1}
optimizer: {name: sgd, learning_rate: 0.01}
train: {batch_size_per_device: 8, steps: 6, display_every: 2, evaluate: false}
variable_update: independent
)");
  WriteFile(dir.path() + "/experiment.yaml", config);
  const std::string run_dir = dir.path() + "/run";
  Subprocess launch =
      Spawn({BinDir() + "/pstrain-launch", dir.path() + "/experiment.yaml", "--run_dir", run_dir}, dir.path());
  std::optional<int> status = WaitForExit(launch.pid, std::chrono::minutes(3));
  ASSERT_TRUE(status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << launch.out() << launch.err();
  absl::StatusOr<RunResult> result = ReadResultJson(run_dir + "/result.json");
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->workers_size(), 1);
  EXPECT_GT(result->workers(0).input_wait_share(), 0.1) << launch.out();
  EXPECT_GT(result->workers(0).input_wait_seconds(), 0);
  EXPECT_THAT(launch.out() + launch.err(), HasSubstr("input-bound"));

  compare::VariantOutcome outcome;
  outcome.label = "one decode thread";
  outcome.ok = true;
  outcome.result = *result;
  const std::vector<compare::ReportRow> rows = compare::ComputeReport({outcome}, 0);
  EXPECT_THAT(compare::FormatMarkdownTable(rows), HasSubstr("(input-bound: "));
}

}  // namespace
}  // namespace pstrain::test
