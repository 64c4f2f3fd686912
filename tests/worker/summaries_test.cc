// The chief's TensorBoard event file (worker/training_summaries.h), read back
// with the checksum-checking reader.
#include <cmath>
#include <filesystem>
#include <map>

#include "common/summary/event_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/equivalence_util.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

TEST(SummariesTest, ChiefWritesTrainAndEvalSeriesThatReadBackWithValidChecksums) {
  const fs::path dir = fs::path(testing::TempDir()) / "summaries_test";
  fs::remove_all(dir);
  ExperimentConfig config = EquivalenceConfig("summaries");
  SetInProcessHosts(&config, /*num_ps=*/1, /*num_workers=*/2);
  config.mutable_train()->set_batch_size_per_device(16);
  config.mutable_train()->set_steps(20);
  config.mutable_train()->set_evaluate(true);
  config.mutable_optimizer()->set_learning_rate(0.03f);
  config.mutable_summaries()->set_dir(dir.string());
  config.mutable_summaries()->set_every_steps(5);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(config);
  ASSERT_TRUE(run.ok()) << run.status();

  std::map<std::string, fs::path> files;  // by writer: chief, ps0
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_THAT(name, ::testing::StartsWith("events.out.tfevents."));
    files[name.substr(name.rfind('.') + 1)] = e.path();
  }
  ASSERT_EQ(files.size(), 2u) << "the chief's and the PS shard's";
  ASSERT_EQ(files.count("chief"), 1u);
  ASSERT_EQ(files.count("ps0"), 1u);

  // The shard's traffic against its version (sync: the global step): at
  // most every 5 steps as the shard samples it (a short run may leave only
  // the end), and the end of the run.
  absl::StatusOr<tb::EventFileContents> ps = tb::ReadEventFile(files["ps0"].string());
  ASSERT_TRUE(ps.ok()) << ps.status();
  std::map<std::string, std::vector<std::pair<int64_t, double>>> ps_series;
  for (const tb::ScalarPoint& p : ps->scalars) ps_series[p.tag].emplace_back(p.step, p.value);
  for (const char* tag : {"ps/received_bytes", "ps/sent_bytes", "ps/apply_seconds", "ps/applied_updates"}) {
    SCOPED_TRACE(tag);
    ASSERT_GE(ps_series[tag].size(), 1u);
    EXPECT_EQ(ps_series[tag].back().first, 20);
    for (size_t i = 1; i < ps_series[tag].size(); ++i) {
      // 5 steps apart at least, but the end comes whenever the run ends.
      const bool last = i + 1 == ps_series[tag].size();
      EXPECT_GE(ps_series[tag][i].first, ps_series[tag][i - 1].first + (last ? 1 : 5));
      EXPECT_GE(ps_series[tag][i].second, ps_series[tag][i - 1].second) << "a running total went down";
    }
  }
  EXPECT_GT(ps_series["ps/received_bytes"].back().second, 0);

  absl::StatusOr<tb::EventFileContents> contents = tb::ReadEventFile(files["chief"].string());
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->file_version, "brain.Event:2");
  std::map<std::string, std::vector<std::pair<int64_t, double>>> series;
  for (const tb::ScalarPoint& p : contents->scalars) series[p.tag].emplace_back(p.step, p.value);

  for (const char* tag : {"train/loss", "train/images_per_sec_chief", "train/learning_rate"}) {
    SCOPED_TRACE(tag);
    ASSERT_EQ(series[tag].size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(series[tag][i].first, 5 * (i + 1));
  }
  for (const auto& [step, loss] : series["train/loss"]) EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  for (const auto& [step, rate] : series["train/images_per_sec_chief"]) EXPECT_GT(rate, 0);
  for (const auto& [step, lr] : series["train/learning_rate"]) EXPECT_FLOAT_EQ(lr, 0.03f);
  ASSERT_EQ(series["eval/test_accuracy"].size(), 1u);
  EXPECT_EQ(series["eval/test_accuracy"][0].first, 20);
  EXPECT_NEAR(series["eval/test_accuracy"][0].second, run->chief.test_accuracy(), 1e-6);
  ASSERT_EQ(series["eval/test_loss"].size(), 1u);
}

}  // namespace
}  // namespace pstrain
