// The chief's side of incremental table checkpoints (worker/checkpoint_manager.h),
// without a cluster: the shard files are bytes the test writes, answered as
// a shard would (size, CRC32C, the step its tables build on). Every
// `table_full_every`-th checkpoint is whole; retention keeps what a kept
// checkpoint builds on; a new manager finds the chain of the newest
// checkpoint, oldest link first, and goes on from it; a damaged link makes
// the checkpoints built on it skipped for an earlier one.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/durable_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"
#include "worker/checkpoint_manager.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

ExperimentConfig Config(const std::string& dir, bool tables = true) {
  ExperimentConfig config;
  config.mutable_model()->set_name("dlrm");
  if (tables) {
    EmbeddingTableConfig* t = config.mutable_model()->add_tables();
    t->set_name("ads");
    t->set_dim(4);
  }
  config.mutable_optimizer()->set_name("adagrad");
  config.mutable_checkpoint()->set_dir(dir);
  config.mutable_checkpoint()->set_table_full_every(3);
  config.mutable_checkpoint()->set_keep(1);
  return config;
}

// One variable, whole, on shard 0 of 1.
std::vector<VariablePart> Parts() {
  VariablePart p;
  p.variable = 0;
  p.shard = 0;
  p.offset = 0;
  p.count = 4;
  p.name = "dense/w";
  p.shape = {4};
  return {p};
}

std::unique_ptr<CheckpointManager> Manager(const ExperimentConfig& config) {
  absl::StatusOr<std::unique_ptr<CheckpointManager>> m = CheckpointManager::Create(config, Parts(), 1);
  EXPECT_TRUE(m.ok()) << m.status();
  EXPECT_NE(m.ok() ? m->get() : nullptr, nullptr);
  return m.ok() ? *std::move(m) : nullptr;
}

class CheckpointChainTest : public ::testing::Test {
 protected:
  std::string Dir(int64_t step) const { return dir_ / ("ckpt-" + std::to_string(step)); }
  std::string File(int64_t step) const { return Dir(step) + "/shard-0-of-1.ckpt"; }
  bool Exists(int64_t step) const { return fs::exists(Dir(step)); }

  // A checkpoint at `step` as the chief takes one: the shard asked to build
  // on TablesSinceStep() answers so (a shard that has that step). Returns
  // the step asked for.
  int64_t Take(CheckpointManager& m, int64_t step) {
    const int64_t since = m.TablesSinceStep();
    absl::StatusOr<std::vector<std::string>> paths = m.PrepareShardPaths(step);
    EXPECT_TRUE(paths.ok()) << paths.status();
    if (!paths.ok()) return -1;
    EXPECT_EQ(*paths, std::vector<std::string>{File(step)});
    absl::StatusOr<FileDigest> digest =
        WriteFileDurably(paths->at(0), "shard file of step " + std::to_string(step) + " on " + std::to_string(since));
    EXPECT_TRUE(digest.ok()) << digest.status();
    CheckpointResponse r;
    r.set_bytes(digest->bytes);
    r.set_crc32c(digest->crc32c);
    r.set_variables(1);
    r.set_tables_since_step(since);
    const absl::Status committed = m.Commit(step, {r}, absl::Now());
    EXPECT_TRUE(committed.ok()) << committed;
    return since;
  }

  CheckpointManifest Manifest(int64_t step) const {
    CheckpointManifest manifest;
    absl::StatusOr<std::string> bytes = ReadWholeFile(Dir(step) + "/MANIFEST");
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (bytes.ok()) {
      EXPECT_TRUE(manifest.ParseFromString(*bytes));
    }
    return manifest;
  }

  // Flips a byte of the shard file of `step` (same size, another CRC32C).
  void Damage(int64_t step) const {
    absl::StatusOr<std::string> bytes = ReadWholeFile(File(step));
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    (*bytes)[0] ^= 0x20;
    test::WriteFile(File(step), *bytes);
  }

  // What a new manager over the directory finds.
  std::optional<RestorePoint> Find(int64_t* since_after = nullptr) const {
    std::unique_ptr<CheckpointManager> m = Manager(config_);
    if (m == nullptr) return std::nullopt;
    absl::StatusOr<std::optional<RestorePoint>> point = m->FindRestorePoint();
    EXPECT_TRUE(point.ok()) << point.status();
    if (since_after != nullptr) *since_after = m->TablesSinceStep();
    return point.ok() ? *point : std::nullopt;
  }

  test::TempDir dir_;
  ExperimentConfig config_ = Config(dir_.path());
};

TEST_F(CheckpointChainTest, EveryThirdCheckpointHoldsEveryRow) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  std::vector<int64_t> since;
  for (int64_t step = 10; step <= 70; step += 10) {
    since.push_back(Take(*m, step));
    // Its MANIFEST records the step its shard file builds on.
    const CheckpointManifest manifest = Manifest(step);
    ASSERT_EQ(manifest.shards_size(), 1);
    EXPECT_EQ(manifest.shards(0).tables_since_step(), since.back()) << "step " << step;
  }
  EXPECT_EQ(since, (std::vector<int64_t>{0, 10, 20, 0, 40, 50, 0}));
}

TEST_F(CheckpointChainTest, ARunWithoutTablesOrWithEveryCheckpointWholeNeverAsksForIncrements) {
  for (ExperimentConfig config : {Config(dir_ / "plain", /*tables=*/false), Config(dir_ / "whole")}) {
    if (config.model().tables_size() > 0) config.mutable_checkpoint()->set_table_full_every(1);
    std::unique_ptr<CheckpointManager> m = Manager(config);
    ASSERT_NE(m, nullptr);
    for (int64_t step = 1; step <= 4; ++step) {
      EXPECT_EQ(m->TablesSinceStep(), 0) << config.checkpoint().dir() << " step " << step;
      CheckpointResponse r;
      absl::StatusOr<std::vector<std::string>> paths = m->PrepareShardPaths(step);
      ASSERT_TRUE(paths.ok()) << paths.status();
      absl::StatusOr<FileDigest> digest = WriteFileDurably(paths->at(0), "x");
      ASSERT_TRUE(digest.ok()) << digest.status();
      r.set_bytes(digest->bytes);
      r.set_crc32c(digest->crc32c);
      ASSERT_TRUE(m->Commit(step, {r}, absl::Now()).ok());
    }
    // keep 1 and nothing built on: only the newest is left.
    EXPECT_TRUE(fs::exists(config.checkpoint().dir() + "/ckpt-4"));
    EXPECT_FALSE(fs::exists(config.checkpoint().dir() + "/ckpt-3"));
  }
}

TEST_F(CheckpointChainTest, RetentionKeepsWhatTheNewestBuildsOn) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  Take(*m, 1);  // whole
  Take(*m, 2);  // on 1
  EXPECT_TRUE(Exists(1));
  EXPECT_TRUE(Exists(2));
  Take(*m, 3);  // on 2
  EXPECT_TRUE(Exists(1));
  EXPECT_TRUE(Exists(2));
  EXPECT_TRUE(Exists(3));
  Take(*m, 4);  // whole: nothing before it is needed
  EXPECT_FALSE(Exists(1));
  EXPECT_FALSE(Exists(2));
  EXPECT_FALSE(Exists(3));
  EXPECT_TRUE(Exists(4));
  Take(*m, 5);  // on 4
  EXPECT_TRUE(Exists(4));
  EXPECT_TRUE(Exists(5));
  // An incomplete checkpoint older than the newest committed goes too.
  ASSERT_TRUE(m->PrepareShardPaths(6).ok());
  fs::create_directories(Dir(0));
  Take(*m, 7);  // on 5
  EXPECT_FALSE(Exists(0));
  EXPECT_FALSE(Exists(6));
  EXPECT_TRUE(Exists(4));
  EXPECT_TRUE(Exists(5));
  EXPECT_TRUE(Exists(7));
}

TEST_F(CheckpointChainTest, ANewManagerFindsTheChainOldestFirstAndGoesOnFromIt) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  Take(*m, 1);
  Take(*m, 2);
  int64_t since = -1;
  std::optional<RestorePoint> point = Find(&since);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->dir, Dir(2));
  EXPECT_EQ(point->table_increments, 1);
  ASSERT_EQ(point->shards.size(), 1u);
  ASSERT_EQ(point->shards[0].table_base_size(), 1);
  EXPECT_EQ(point->shards[0].table_base(0).path(), File(1));
  EXPECT_EQ(since, 2);  // one increment so far: the next builds on step 2

  Take(*m, 3);
  point = Find(&since);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->dir, Dir(3));
  EXPECT_EQ(point->shards[0].path(), File(3));
  EXPECT_EQ(point->shards[0].step(), 3);
  ASSERT_EQ(point->shards[0].table_base_size(), 2);
  const CheckpointManifest m1 = Manifest(1), m2 = Manifest(2);
  const ShardRestore& first = point->shards[0].table_base(0);
  const ShardRestore& second = point->shards[0].table_base(1);
  EXPECT_EQ(first.path(), File(1));
  EXPECT_EQ(first.step(), 1);
  EXPECT_EQ(first.bytes(), m1.shards(0).bytes());
  EXPECT_EQ(first.crc32c(), m1.shards(0).crc32c());
  EXPECT_EQ(second.path(), File(2));
  EXPECT_EQ(second.step(), 2);
  EXPECT_EQ(second.bytes(), m2.shards(0).bytes());
  EXPECT_EQ(second.crc32c(), m2.shards(0).crc32c());
  EXPECT_EQ(point->table_increments, 2);
  // Two increments with full_every 3: the next is whole, as the manager
  // that wrote them would say too.
  EXPECT_EQ(since, 0);
  EXPECT_EQ(m->TablesSinceStep(), 0);

  // A resumed manager goes on from the restored point.
  std::unique_ptr<CheckpointManager> resumed = Manager(config_);
  ASSERT_NE(resumed, nullptr);
  ASSERT_TRUE(resumed->FindRestorePoint().ok());
  EXPECT_EQ(Take(*resumed, 4), 0);
  EXPECT_EQ(Take(*resumed, 5), 4);
  point = Find(&since);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->dir, Dir(5));
  ASSERT_EQ(point->shards[0].table_base_size(), 1);
  EXPECT_EQ(point->shards[0].table_base(0).path(), File(4));
  EXPECT_EQ(since, 5);
  EXPECT_FALSE(Exists(3));  // keep 1: 5 builds on 4 alone
}

TEST_F(CheckpointChainTest, ADamagedLinkSkipsToAnEarlierCheckpoint) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  Take(*m, 1);
  Take(*m, 2);
  Take(*m, 3);
  Damage(2);
  // 3 builds on the damaged 2, 2 is damaged itself: 1 is the newest whole.
  int64_t since = -1;
  std::optional<RestorePoint> point = Find(&since);
  ASSERT_TRUE(point.has_value());
  EXPECT_EQ(point->dir, Dir(1));
  EXPECT_EQ(point->shards[0].table_base_size(), 0);
  EXPECT_EQ(point->table_increments, 0);
  EXPECT_EQ(since, 1);

  // The whole file damaged too: nothing to resume, the next is whole.
  Damage(1);
  point = Find(&since);
  EXPECT_FALSE(point.has_value());
  EXPECT_EQ(since, 0);
}

TEST_F(CheckpointChainTest, AMissingLinkSkipsTheCheckpointsBuiltOnIt) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  Take(*m, 1);
  Take(*m, 2);
  Take(*m, 3);
  fs::remove(Dir(1) + "/MANIFEST");  // 1 never committed, as far as anyone knows
  std::optional<RestorePoint> point = Find();
  EXPECT_FALSE(point.has_value()) << point->dir;

  // An explicit restore of a checkpoint whose chain is broken is an error.
  ExperimentConfig explicit_restore = config_;
  explicit_restore.mutable_checkpoint()->set_restore(Dir(3));
  std::unique_ptr<CheckpointManager> e = Manager(explicit_restore);
  ASSERT_NE(e, nullptr);
  absl::StatusOr<std::optional<RestorePoint>> found = e->FindRestorePoint();
  EXPECT_EQ(found.status().code(), absl::StatusCode::kDataLoss) << found.status();
  EXPECT_THAT(found.status().message(), ::testing::HasSubstr(Dir(1)));
}

TEST_F(CheckpointChainTest, AnExplicitRestoreFindsTheChainBesideIt) {
  std::unique_ptr<CheckpointManager> m = Manager(config_);
  ASSERT_NE(m, nullptr);
  Take(*m, 1);
  Take(*m, 2);
  Take(*m, 3);
  // As given on the command line, with or without a trailing slash.
  for (const std::string& restore : {Dir(2), Dir(2) + "/"}) {
    ExperimentConfig explicit_restore = config_;
    explicit_restore.mutable_checkpoint()->set_restore(restore);
    std::unique_ptr<CheckpointManager> e = Manager(explicit_restore);
    ASSERT_NE(e, nullptr);
    absl::StatusOr<std::optional<RestorePoint>> found = e->FindRestorePoint();
    ASSERT_TRUE(found.ok()) << restore << ": " << found.status();
    ASSERT_TRUE(found->has_value()) << restore;
    ASSERT_EQ((*found)->shards.size(), 1u);
    ASSERT_EQ((*found)->shards[0].table_base_size(), 1) << restore;
    EXPECT_EQ((*found)->shards[0].table_base(0).path(), File(1));
    // An increment on the restored checkpoint comes next.
    EXPECT_EQ(e->TablesSinceStep(), 2) << restore;
  }
  // checkpoint.dir given with a trailing slash: its newest is still "here".
  ExperimentConfig slash = config_;
  slash.mutable_checkpoint()->set_dir(dir_.path() + "/");
  std::unique_ptr<CheckpointManager> s = Manager(slash);
  ASSERT_NE(s, nullptr);
  absl::StatusOr<std::optional<RestorePoint>> found = s->FindRestorePoint();
  ASSERT_TRUE(found.ok() && found->has_value()) << found.status();
  EXPECT_EQ((*found)->shards[0].table_base_size(), 2);
  EXPECT_EQ(s->TablesSinceStep(), 0);  // 3 is the second increment
  EXPECT_EQ(Take(*s, 4), 0);
  EXPECT_EQ(Take(*s, 5), 4);
  std::unique_ptr<CheckpointManager> t = Manager(slash);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->FindRestorePoint().ok());
  EXPECT_EQ(t->TablesSinceStep(), 5);
}

}  // namespace
}  // namespace pstrain
