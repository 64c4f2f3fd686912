// Checkpoints of a PS cluster (worker/checkpoint_manager.h,
// ps/shard/shard_checkpoint.h): a sync run resumed from a checkpoint ends exactly
// where an uninterrupted run ends, also on another shard count (embedding
// tables included); a damaged newest checkpoint is skipped for the previous
// one; a checkpoint of another model is refused.
#include <filesystem>
#include <fstream>

#include "common/config/config_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/worker/equivalence_util.h"
#include "tests/worker/in_process_cluster.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kSteps = 8;

// 2 PS shards, 2 workers, batch 8 each, momentum (so optimizer slots matter).
ExperimentConfig ClusterConfig(int64_t steps) {
  ExperimentConfig config = EquivalenceConfig("checkpoint");
  SetInProcessHosts(&config, /*num_ps=*/2, /*num_workers=*/2);
  config.mutable_train()->set_batch_size_per_device(8);
  config.mutable_train()->set_steps(steps);
  return config;
}

// For runs the chief refuses at start: the same shards but only the chief,
// so no other worker is left waiting for its startup deadline.
ExperimentConfig ChiefOnlyConfig(int64_t steps) {
  ExperimentConfig config = ClusterConfig(steps);
  SetInProcessHosts(&config, /*num_ps=*/2, /*num_workers=*/1);
  return config;
}

std::string FreshDir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("ckpt_" + name);
  fs::remove_all(dir);
  return dir.string();
}

bool Committed(const std::string& dir, int step) {
  return fs::exists(fs::path(dir) / ("ckpt-" + std::to_string(step)) / "MANIFEST");
}

TEST(CheckpointTest, SyncRunResumedFromACheckpointEndsWhereAnUninterruptedRunEnds) {
  absl::StatusOr<ClusterRun> whole = RunInProcessCluster(ClusterConfig(kSteps));
  ASSERT_TRUE(whole.ok()) << whole.status();

  // First half, checkpointing every 2 steps (and at its end); every process
  // of it is gone when it returns.
  const std::string dir = FreshDir("resume");
  ExperimentConfig first = ClusterConfig(kSteps / 2);
  first.mutable_checkpoint()->set_dir(dir);
  first.mutable_checkpoint()->set_every_steps(2);
  absl::StatusOr<ClusterRun> half = RunInProcessCluster(first);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_TRUE(Committed(dir, 2));
  EXPECT_TRUE(Committed(dir, kSteps / 2));
  // Training moved the parameters, so agreeing below means something.
  EXPECT_GT(MaxRelativeDifference(half->final_params, whole->final_params), 1e-4);

  // Second half: a new cluster over the same directory. Another init seed:
  // a run that did not restore would start elsewhere.
  ExperimentConfig second = ClusterConfig(kSteps);
  second.mutable_checkpoint()->set_dir(dir);
  second.mutable_checkpoint()->set_every_steps(2);
  second.mutable_checkpoint()->set_keep(2);
  second.mutable_train()->set_init_seed(4242);
  absl::StatusOr<ClusterRun> resumed = RunInProcessCluster(second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_LT(MaxRelativeDifference(resumed->final_params, whole->final_params), 1e-6);

  // keep 2: the two newest committed checkpoints remain.
  EXPECT_TRUE(Committed(dir, kSteps));
  EXPECT_TRUE(Committed(dir, kSteps - 2));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "ckpt-4"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "ckpt-2"));
}

// Resharding: a checkpoint written by 2 shards restores onto 3, onto 1,
// and onto 3 with every variable cut into parts; sync training then ends
// bit for bit where the uninterrupted 2-shard run ends (same global batch).
TEST(CheckpointTest, ACheckpointOfTwoShardsRestoresOntoOtherShardCountsAndPlacementsBitForBit) {
  absl::StatusOr<ClusterRun> whole = RunInProcessCluster(ClusterConfig(kSteps));
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::string dir = FreshDir("reshard");
  ExperimentConfig first = ClusterConfig(kSteps / 2);
  first.mutable_checkpoint()->set_dir(dir);
  ASSERT_TRUE(RunInProcessCluster(first).ok());
  ASSERT_TRUE(Committed(dir, kSteps / 2));

  struct Layout {
    std::string name;
    int shards;
    std::string placement;
  };
  for (const Layout& layout :
       {Layout{"three", 3, "round_robin"}, Layout{"one", 1, "round_robin"}, Layout{"three_cut", 3, "partitioned"}}) {
    SCOPED_TRACE(layout.name);
    const std::string copy = FreshDir("reshard_" + layout.name);
    fs::copy(dir, copy, fs::copy_options::recursive);
    ExperimentConfig second = ClusterConfig(kSteps);
    SetInProcessHosts(&second, layout.shards, /*num_workers=*/2);
    second.set_placement(layout.placement);
    second.set_partition_bytes(256);  // partitioned: every weight matrix in parts of 64 floats
    second.mutable_checkpoint()->set_dir(copy);
    second.mutable_train()->set_init_seed(4242);  // a run that did not restore would start elsewhere
    absl::StatusOr<ClusterRun> resumed = RunInProcessCluster(second);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(MaxRelativeDifference(resumed->final_params, whole->final_params), 0);
    const fs::path resharded = fs::path(copy) / ("ckpt-" + std::to_string(kSteps / 2)) /
                               ("reshard-" + std::to_string(layout.shards) + "-shards") / "MANIFEST";
    EXPECT_TRUE(fs::exists(resharded)) << resharded;
    EXPECT_TRUE(Committed(copy, kSteps));  // and it checkpoints in its own layout
  }
}

// DLRM, 2 workers x batch 16, sync, Adagrad rows: table C1 dynamic (rows
// keyed by the ids themselves), C2 and C3 fixed-size.
ExperimentConfig DlrmConfig(int shards, int64_t steps) {
  ExperimentConfig config = DlrmEquivalenceConfig("adagrad");
  config.mutable_model()->mutable_tables(0)->clear_cardinality();
  SetInProcessHosts(&config, shards, /*num_workers=*/2);
  config.mutable_train()->set_batch_size_per_device(16);
  config.mutable_train()->set_steps(steps);
  return config;
}

// Embedding tables reshard too: a 2-shard DLRM checkpoint whose tables are
// a chain (a whole file, then two increments) restores onto 3 shards and
// onto 1, each row on the shard that owns its key now, and sync training
// ends bit for bit where the uninterrupted run ends. The init seed stays
// (rows first touched after the checkpoint start from it); rows not
// restored would start again from their initial values and show in the
// dense parameters they feed.
TEST(CheckpointTest, ACheckpointWithEmbeddingTablesRestoresOntoOtherShardCountsBitForBit) {
  constexpr int kDlrmSteps = 12;
  absl::StatusOr<ClusterRun> whole = RunInProcessCluster(DlrmConfig(2, kDlrmSteps));
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::string dir = FreshDir("reshard_tables");
  ExperimentConfig first = DlrmConfig(2, kDlrmSteps / 2);
  first.mutable_checkpoint()->set_dir(dir);
  first.mutable_checkpoint()->set_every_steps(2);
  first.mutable_checkpoint()->set_table_full_every(3);  // ckpt-2 whole, ckpt-4 and ckpt-6 increments
  absl::StatusOr<ClusterRun> half = RunInProcessCluster(first);
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_GT(MaxRelativeDifference(half->final_params, whole->final_params), 1e-4);
  CheckpointManifest manifest;
  std::ifstream in(fs::path(dir) / ("ckpt-" + std::to_string(kDlrmSteps / 2)) / "MANIFEST", std::ios::binary);
  ASSERT_TRUE(manifest.ParseFromIstream(&in));
  ASSERT_EQ(manifest.shards_size(), 2);
  EXPECT_EQ(manifest.shards(0).tables_since_step(), kDlrmSteps / 2 - 2);

  for (const int shards : {3, 1}) {
    SCOPED_TRACE(shards);
    const std::string copy = FreshDir("reshard_tables_" + std::to_string(shards));
    fs::copy(dir, copy, fs::copy_options::recursive);
    ExperimentConfig second = DlrmConfig(shards, kDlrmSteps);
    second.mutable_checkpoint()->set_dir(copy);
    absl::StatusOr<ClusterRun> resumed = RunInProcessCluster(second);
    ASSERT_TRUE(resumed.ok()) << resumed.status();
    EXPECT_EQ(MaxRelativeDifference(resumed->final_params, whole->final_params), 0);
    EXPECT_TRUE(fs::exists(fs::path(copy) / ("ckpt-" + std::to_string(kDlrmSteps / 2)) /
                           ("reshard-" + std::to_string(shards) + "-shards") / "MANIFEST"));
    EXPECT_TRUE(Committed(copy, kDlrmSteps));
  }
}

TEST(CheckpointTest, DamagedNewestCheckpointIsSkippedForThePreviousOne) {
  absl::StatusOr<ClusterRun> whole = RunInProcessCluster(ClusterConfig(kSteps));
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::string dir = FreshDir("damaged");
  ExperimentConfig first = ClusterConfig(kSteps / 2);
  first.mutable_checkpoint()->set_dir(dir);
  first.mutable_checkpoint()->set_every_steps(2);
  ASSERT_TRUE(RunInProcessCluster(first).ok());
  ASSERT_TRUE(Committed(dir, 2) && Committed(dir, 4));

  // One byte of shard 1's file in the newest checkpoint flipped.
  const fs::path damaged = fs::path(dir) / "ckpt-4" / "shard-1-of-2.ckpt";
  {
    std::fstream f(damaged, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(100);
    f.write(&c, 1);
  }

  // Asking for exactly that checkpoint is an error naming the file.
  ExperimentConfig exact = ChiefOnlyConfig(kSteps);
  exact.mutable_checkpoint()->set_restore((fs::path(dir) / "ckpt-4").string());
  absl::StatusOr<ClusterRun> refused = RunInProcessCluster(exact);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("shard-1-of-2.ckpt"));
  EXPECT_THAT(refused.status().message(), HasSubstr("corrupted"));

  // Resuming from the directory takes step 2's instead (another init seed:
  // a fresh start would end elsewhere), and still ends where the whole run did.
  ExperimentConfig second = ClusterConfig(kSteps);
  second.mutable_checkpoint()->set_dir(dir);
  second.mutable_train()->set_init_seed(4242);
  absl::StatusOr<ClusterRun> resumed = RunInProcessCluster(second);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_LT(MaxRelativeDifference(resumed->final_params, whole->final_params), 1e-6);
}

// Async: the shards keep applying pushes while they write; every
// checkpoint commits, and a new cluster resumes from the last one.
TEST(CheckpointTest, AsyncRunCheckpointsWhileTrainingAndResumes) {
  const std::string dir = FreshDir("async");
  ExperimentConfig first = ClusterConfig(kSteps);
  first.set_consistency("async");
  first.mutable_checkpoint()->set_dir(dir);
  first.mutable_checkpoint()->set_every_steps(1);
  first.mutable_checkpoint()->set_keep(100);
  absl::StatusOr<ClusterRun> run = RunInProcessCluster(first);
  ASSERT_TRUE(run.ok()) << run.status();
  for (int step = 1; step <= kSteps; ++step) EXPECT_TRUE(Committed(dir, step)) << step;

  ExperimentConfig more = first;
  more.mutable_train()->set_steps(kSteps + 4);
  absl::StatusOr<ClusterRun> resumed = RunInProcessCluster(more);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(Committed(dir, kSteps + 4));
  EXPECT_FALSE(Committed(dir, kSteps + 5));
}

TEST(CheckpointTest, CheckpointOfAnotherModelIsRefusedSayingWhatDiffers) {
  const std::string dir = FreshDir("other_model");
  ExperimentConfig first = ClusterConfig(2);
  first.mutable_checkpoint()->set_dir(dir);
  ASSERT_TRUE(RunInProcessCluster(first).ok());
  ASSERT_TRUE(Committed(dir, 2));

  ExperimentConfig other = ChiefOnlyConfig(4);
  other.mutable_model()->set_hidden_units(1, 8);  // (32, 16) there, (32, 8) here
  other.mutable_checkpoint()->set_dir(dir);
  absl::StatusOr<ClusterRun> refused = RunInProcessCluster(other);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("is not of this run's model"));
  EXPECT_THAT(refused.status().message(), HasSubstr("there"));
  EXPECT_THAT(refused.status().message(), HasSubstr("16"));

  ExperimentConfig sgd = ChiefOnlyConfig(4);
  sgd.mutable_optimizer()->set_name("sgd");
  sgd.mutable_checkpoint()->set_dir(dir);
  refused = RunInProcessCluster(sgd);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("optimizer momentum there, sgd here"));
}

// A run started beside a checkpoint at its last step has nothing to train:
// it ends as a finished run does, with the checkpoint's parameters.
TEST(CheckpointTest, ARunWhoseCheckpointIsAtItsLastStepEndsWithThoseParameters) {
  const std::string dir = FreshDir("complete");
  ExperimentConfig first = ClusterConfig(2);
  first.mutable_checkpoint()->set_dir(dir);
  absl::StatusOr<ClusterRun> trained = RunInProcessCluster(first);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_TRUE(Committed(dir, 2));

  ExperimentConfig again = ClusterConfig(2);
  again.mutable_checkpoint()->set_dir(dir);
  again.mutable_train()->set_init_seed(4242);
  absl::StatusOr<ClusterRun> done = RunInProcessCluster(again);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(MaxRelativeDifference(done->final_params, trained->final_params), 0);
}

TEST(CheckpointTest, UnwritableDirectoryIsAnErrorBeforeTraining) {
  const fs::path file = fs::path(testing::TempDir()) / "ckpt_not_a_dir";
  std::ofstream(file) << "a file";
  ExperimentConfig config = ChiefOnlyConfig(2);
  config.mutable_checkpoint()->set_dir((file / "sub").string());
  absl::StatusOr<ClusterRun> refused = RunInProcessCluster(config);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("checkpoint.dir"));
  EXPECT_THAT(refused.status().message(), HasSubstr((file / "sub").string()));
}

TEST(CheckpointTest, ConfigRefusesCheckpointsWithoutParameterServers) {
  ExperimentConfig config = ClusterConfig(2);
  config.set_variable_update("allreduce");
  config.mutable_checkpoint()->set_dir("/tmp/x");
  absl::Status status = ValidateExperimentConfig(config, "exp.yaml");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("checkpoint.dir"));
  EXPECT_THAT(status.message(), HasSubstr("distributed_replicated and parameter_server"));

  ExperimentConfig no_dir = ClusterConfig(2);
  no_dir.mutable_checkpoint()->set_every_steps(10);
  status = ValidateExperimentConfig(no_dir, "exp.yaml");
  EXPECT_THAT(status.message(), HasSubstr("checkpoint.dir"));
}

}  // namespace
}  // namespace pstrain
