// Embedding tables in a shard's checkpoint (ps/shard/shard_checkpoint.h,
// common/shard_checkpoint_file.h): a shard restored from the file answers
// the same rows at the same version and, its optimizer slots restored too,
// moves them as the original does; a file whose tables are not the run's is
// refused saying why; a truncated tables section is DATA_LOSS.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/durable_file.h"
#include "common/shard_checkpoint_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/shard/shard.h"
#include "tests/ps/table_shard_test_util.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

using table_test::Frame;
using table_test::kDim;
using table_test::Pull;
using table_test::Push;
using table_test::Shard;

PsShardOptions Options(int dim = kDim) { return table_test::TableShardOptions(dim); }

class TableCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::Status init;
    original_ = Shard(Options(), nullptr, &init);
    ASSERT_TRUE(init.ok()) << init;
    for (int i = 0; i < 5; ++i) Push(*original_, {1, 2, 3 + static_cast<uint64_t>(i)}, 0.5f + i);
    CheckpointRequest request;
    request.set_path(dir_.path() + "/shard-0.ckpt");
    request.set_step(5);
    absl::StatusOr<CheckpointResponse> written = original_->Checkpoint(request);
    ASSERT_TRUE(written.ok()) << written.status();
    restore_.set_path(request.path());
    restore_.set_bytes(written->bytes());
    restore_.set_crc32c(written->crc32c());
    restore_.set_step(5);
  }

  test::TempDir dir_;
  std::unique_ptr<PsShard> original_;
  ShardRestore restore_;
};

TEST_F(TableCheckpointTest, ARestoredShardHasTheRowsVersionAndSlots) {
  absl::Status init;
  std::unique_ptr<PsShard> restored = Shard(Options(), &restore_, &init);
  ASSERT_TRUE(init.ok()) << init;
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(Pull(*restored, keys), Pull(*original_, keys));
  EXPECT_EQ(Pull(*restored, keys).second, 5);
  // Adagrad's accumulators came back too: the same push moves both alike.
  Push(*original_, {1, 7}, 2.0f);
  Push(*restored, {1, 7}, 2.0f);
  EXPECT_EQ(Pull(*restored, keys), Pull(*original_, keys));
  EXPECT_EQ(restored->Stats().tables(0).rows(), 7);
}

TEST_F(TableCheckpointTest, TablesThatAreNotTheRunsAreRefused) {
  absl::Status init;
  Shard(Options(/*dim=*/8), &restore_, &init);
  EXPECT_EQ(init.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(init.message(), HasSubstr("table ads has dim 4 and 1 optimizer slots there, 8 and 1 here"));
  PsShardOptions no_tables = Options();
  no_tables.tables.clear();
  Shard(no_tables, &restore_, &init);
  EXPECT_THAT(init.message(), HasSubstr("1 embedding tables there, 0 here"));
}

// Sparse requests carry the generation of the state the worker works on: one
// made before a restore must not land on the restored tables.
TEST_F(TableCheckpointTest, SparseRequestsOfAnotherGenerationAreAborted) {
  const std::vector<uint64_t> keys = {1, 2};
  SparsePushRequest push;
  push.set_table("ads");
  push.set_num_ids(2);
  push.set_dim(kDim);
  std::string payload(reinterpret_cast<const char*>(keys.data()), keys.size() * 8);
  payload.append(std::string(keys.size() * kDim * 4, '\0'));
  for (int64_t generation : {int64_t{1}, int64_t{0}, int64_t{2}}) {
    push.set_generation(generation);
    IncomingFrame frame = Frame(push, payload.data(), payload.size());
    absl::StatusOr<SparsePushResponse> pushed = original_->SparsePush(push, frame);
    if (generation == 2) {
      EXPECT_EQ(pushed.status().code(), absl::StatusCode::kAborted) << pushed.status();
      EXPECT_THAT(pushed.status().message(), HasSubstr("this request is of generation 2"));
    } else {
      EXPECT_TRUE(pushed.ok()) << "generation " << generation << ": " << pushed.status();
    }
  }
  SparsePullRequest pull;
  pull.set_table("ads");
  pull.set_num_ids(2);
  pull.set_generation(3);
  IncomingFrame frame = Frame(pull, keys.data(), keys.size() * 8);
  absl::Status answered = absl::UnknownError("not answered");
  original_->SparsePull(pull, frame, [&answered](absl::Status s, OutgoingFrame) { answered = s; });
  EXPECT_EQ(answered.code(), absl::StatusCode::kAborted) << answered;
  EXPECT_EQ(Pull(*original_, keys).second, 7);  // the two pushes of generations 1 and 0 applied, nothing else
}

TEST_F(TableCheckpointTest, ATruncatedTablesSectionIsDataLoss) {
  absl::StatusOr<std::string> data = ReadWholeFile(restore_.path());
  ASSERT_TRUE(data.ok()) << data.status();
  absl::StatusOr<ShardCheckpointView> whole = DecodeShardCheckpoint(*data, "f");
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ(whole->tables.size(), 1u);
  EXPECT_EQ(whole->tables[0].rows, 7);
  absl::StatusOr<ShardCheckpointView> cut = DecodeShardCheckpoint(data->substr(0, data->size() - 4), "f");
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(cut.status().message(), HasSubstr("fewer than its table ads describes"));
}

}  // namespace
}  // namespace pstrain
