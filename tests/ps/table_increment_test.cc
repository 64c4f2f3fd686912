// Incremental checkpoints of a shard's embedding tables (ps/shard/shard_checkpoint.h,
// ps/embedding/sparse_tables.h, common/table_chain.h): a checkpoint
// asked to build on an earlier one holds only the rows changed since; a
// shard restored from the chain (whole file, then increments) has every row,
// version and optimizer slot of the original; a shard asked to build on a
// step it never recorded writes every row and says so; a chain with a link
// missing, out of order or damaged is DATA_LOSS naming the file; rows a
// max_rows table evicted between the links do not come back.
#include <cstring>
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
using ::testing::UnorderedElementsAreArray;

using table_test::Frame;
using table_test::kDim;
using table_test::Pull;
using table_test::Push;
using table_test::Shard;

PsShardOptions Options(int64_t max_rows = 0) { return table_test::TableShardOptions(kDim, max_rows); }

// Asks `shard` for a checkpoint of `step` at `path` building its tables on
// `since`; the ShardRestore naming the file written.
ShardRestore Checkpoint(PsShard& shard, const std::string& path, int64_t step, int64_t since, int64_t* answered_since) {
  CheckpointRequest request;
  request.set_path(path);
  request.set_step(step);
  request.set_tables_since_step(since);
  absl::StatusOr<CheckpointResponse> written = shard.Checkpoint(request);
  EXPECT_TRUE(written.ok()) << written.status();
  ShardRestore restore;
  if (!written.ok()) return restore;
  *answered_since = written->tables_since_step();
  restore.set_path(path);
  restore.set_bytes(written->bytes());
  restore.set_crc32c(written->crc32c());
  restore.set_step(step);
  return restore;
}

// The file's header and its one table's keys (and live keys, if listed).
struct FileTable {
  ShardCheckpointHeader header;
  int64_t rows = -1;
  int64_t version = -1;
  std::vector<uint64_t> keys;
  std::vector<uint64_t> live_keys;
  bool has_live_keys = false;
};

FileTable ReadTable(const std::string& path) {
  FileTable out;
  absl::StatusOr<std::string> data = ReadWholeFile(path);
  EXPECT_TRUE(data.ok()) << data.status();
  if (!data.ok()) return out;
  absl::StatusOr<ShardCheckpointView> view = DecodeShardCheckpoint(*data, path);
  EXPECT_TRUE(view.ok()) << view.status();
  if (!view.ok()) return out;
  out.header = view->header;
  EXPECT_EQ(view->tables.size(), 1u);
  if (view->tables.size() != 1) return out;
  const ShardCheckpointTable& t = view->tables[0];
  out.rows = t.rows;
  out.version = t.version;
  out.keys.resize(t.rows);
  std::memcpy(out.keys.data(), data->data() + t.keys_offset, t.rows * sizeof(uint64_t));
  out.has_live_keys = t.live_keys >= 0;
  if (out.has_live_keys) {
    out.live_keys.resize(t.live_keys);
    std::memcpy(out.live_keys.data(), data->data() + t.live_keys_offset, t.live_keys * sizeof(uint64_t));
  }
  return out;
}

class TableIncrementTest : public ::testing::Test {
 protected:
  // A whole checkpoint at step 2, increments at 4 (on 2) and 6 (on 4).
  void SetUp() override {
    absl::Status init;
    original_ = Shard(Options(), nullptr, &init);
    ASSERT_TRUE(init.ok()) << init;
    Push(*original_, {1, 2, 3, 4, 5, 6}, 0.5f);
    Push(*original_, {1, 2, 3}, 1.0f);
    step2_ = Checkpoint(*original_, dir_ / "step-2.ckpt", 2, 0, &since_[0]);
    Push(*original_, {2, 7}, 1.5f);
    step4_ = Checkpoint(*original_, dir_ / "step-4.ckpt", 4, 2, &since_[1]);
    Push(*original_, {3, 8}, 2.0f);
    Push(*original_, {3}, -1.0f);
    step6_ = Checkpoint(*original_, dir_ / "step-6.ckpt", 6, 4, &since_[2]);
  }

  // Init of a fresh shard restoring `restore`.
  absl::Status Restore(const ShardRestore& restore, std::unique_ptr<PsShard>* shard = nullptr) {
    absl::Status init;
    std::unique_ptr<PsShard> s = Shard(Options(), &restore, &init);
    if (shard != nullptr) *shard = std::move(s);
    return init;
  }

  ShardRestore Step6On(const std::vector<ShardRestore>& base) const {
    ShardRestore r = step6_;
    for (const ShardRestore& b : base) *r.add_table_base() = b;
    return r;
  }

  test::TempDir dir_;
  std::unique_ptr<PsShard> original_;
  ShardRestore step2_, step4_, step6_;
  int64_t since_[3] = {-1, -1, -1};
};

TEST_F(TableIncrementTest, IncrementsHoldOnlyTheRowsChangedSince) {
  EXPECT_EQ(since_[0], 0);
  EXPECT_EQ(since_[1], 2);
  EXPECT_EQ(since_[2], 4);

  const FileTable whole = ReadTable(step2_.path());
  EXPECT_EQ(whole.header.tables_since_step(), 0);
  EXPECT_EQ(whole.rows, 6);
  EXPECT_EQ(whole.version, 2);
  EXPECT_THAT(whole.keys, UnorderedElementsAreArray({1u, 2u, 3u, 4u, 5u, 6u}));
  EXPECT_FALSE(whole.has_live_keys);

  const FileTable inc4 = ReadTable(step4_.path());
  EXPECT_EQ(inc4.header.tables_since_step(), 2);
  EXPECT_EQ(inc4.rows, 2);
  EXPECT_EQ(inc4.version, 3);
  EXPECT_THAT(inc4.keys, UnorderedElementsAreArray({2u, 7u}));
  EXPECT_FALSE(inc4.has_live_keys);  // no max_rows: nothing is ever dropped

  const FileTable inc6 = ReadTable(step6_.path());
  EXPECT_EQ(inc6.header.tables_since_step(), 4);
  EXPECT_EQ(inc6.rows, 2);
  EXPECT_EQ(inc6.version, 5);
  EXPECT_THAT(inc6.keys, UnorderedElementsAreArray({3u, 8u}));
  // The increments are smaller than the whole file.
  EXPECT_LT(step4_.bytes(), step2_.bytes());
  EXPECT_LT(step6_.bytes(), step2_.bytes());
}

TEST_F(TableIncrementTest, AShardRestoredFromTheChainHasEveryRowVersionAndSlot) {
  std::unique_ptr<PsShard> restored;
  const absl::Status init = Restore(Step6On({step2_, step4_}), &restored);
  ASSERT_TRUE(init.ok()) << init;
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(restored->Stats().tables(0).rows(), 8);
  EXPECT_EQ(Pull(*restored, keys), Pull(*original_, keys));
  EXPECT_EQ(Pull(*restored, keys).second, 5);
  // Adagrad's accumulators came back from every link: the same pushes move
  // both alike (row 1 last written by the whole file, 2 and 7 by the first
  // increment, 3 and 8 by the second).
  Push(*original_, {1, 2, 3, 7, 8}, 0.7f);
  Push(*restored, {1, 2, 3, 7, 8}, 0.7f);
  EXPECT_EQ(Pull(*restored, keys), Pull(*original_, keys));

  // The restored shard records step 6: an increment on it holds only what
  // was pushed since, and restores like the original's.
  int64_t since = -1;
  const ShardRestore step8 = Checkpoint(*restored, dir_ / "step-8.ckpt", 8, 6, &since);
  EXPECT_EQ(since, 6);
  const FileTable inc8 = ReadTable(step8.path());
  EXPECT_THAT(inc8.keys, UnorderedElementsAreArray({1u, 2u, 3u, 7u, 8u}));
  ShardRestore chain8 = step8;
  for (const ShardRestore& b : {step2_, step4_, step6_}) *chain8.add_table_base() = b;
  std::unique_ptr<PsShard> again;
  const absl::Status init8 = Restore(chain8, &again);
  ASSERT_TRUE(init8.ok()) << init8;
  EXPECT_EQ(Pull(*again, keys), Pull(*original_, keys));
}

TEST_F(TableIncrementTest, AWholeFileIgnoresItsTableBase) {
  // step 2's tables are whole: a table_base given with it is not read.
  ShardRestore whole = step2_;
  ShardRestore bogus = step4_;
  bogus.set_crc32c(bogus.crc32c() ^ 1);
  *whole.add_table_base() = bogus;
  std::unique_ptr<PsShard> restored;
  const absl::Status init = Restore(whole, &restored);
  ASSERT_TRUE(init.ok()) << init;
  EXPECT_EQ(restored->Stats().tables(0).rows(), 6);
  EXPECT_EQ(Pull(*restored, {1}).second, 2);
}

TEST_F(TableIncrementTest, AnIncrementOnAStepTheShardNeverRecordedHoldsEveryRow) {
  int64_t since = -1;
  // Step 3 was never checkpointed by this shard.
  const ShardRestore step8 = Checkpoint(*original_, dir_ / "step-8.ckpt", 8, 3, &since);
  EXPECT_EQ(since, 0);
  const FileTable file = ReadTable(step8.path());
  EXPECT_EQ(file.header.tables_since_step(), 0);
  EXPECT_EQ(file.rows, 8);
  // It restores alone.
  std::unique_ptr<PsShard> restored;
  const absl::Status init = Restore(step8, &restored);
  ASSERT_TRUE(init.ok()) << init;
  const std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(Pull(*restored, keys), Pull(*original_, keys));

  // A fresh shard (as after a restart) has no record at all.
  absl::Status fresh_init;
  std::unique_ptr<PsShard> fresh = Shard(Options(), nullptr, &fresh_init);
  ASSERT_TRUE(fresh_init.ok()) << fresh_init;
  Push(*fresh, {1, 2}, 1.0f);
  since = -1;
  const ShardRestore fresh_file = Checkpoint(*fresh, dir_ / "fresh.ckpt", 6, 4, &since);
  EXPECT_EQ(since, 0);
  EXPECT_EQ(ReadTable(fresh_file.path()).rows, 2);
}

TEST_F(TableIncrementTest, ABrokenChainIsDataLossNamingTheFile) {
  // No base at all.
  absl::Status init = Restore(Step6On({}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step6_.path()));

  // The step-4 link missing: step 6 builds on 4, the chain gives 2.
  init = Restore(Step6On({step2_}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step6_.path()));
  EXPECT_THAT(init.message(), HasSubstr("builds its tables on step 4"));

  // Out of order: the first link must be a whole file.
  init = Restore(Step6On({step4_, step2_}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step4_.path()));

  // Only the increment, as if it were whole.
  init = Restore(Step6On({step4_}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step4_.path()));

  // A damaged link: its digest does not match.
  ShardRestore damaged = step2_;
  damaged.set_crc32c(damaged.crc32c() ^ 1);
  init = Restore(Step6On({damaged, step4_}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step2_.path()));

  // A link of the right size whose bytes changed.
  absl::StatusOr<std::string> bytes = ReadWholeFile(step4_.path());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  (*bytes)[bytes->size() - 1] ^= 0x40;
  test::WriteFile(step4_.path(), *bytes);
  init = Restore(Step6On({step2_, step4_}));
  EXPECT_EQ(init.code(), absl::StatusCode::kDataLoss) << init;
  EXPECT_THAT(init.message(), HasSubstr(step4_.path()));
}

TEST(TableIncrementMaxRowsTest, RowsEvictedBetweenLinksDoNotComeBack) {
  test::TempDir dir;
  absl::Status init;
  // One shard holding at most 4 rows, least recently touched dropped first.
  std::unique_ptr<PsShard> original = Shard(Options(/*max_rows=*/4), nullptr, &init);
  ASSERT_TRUE(init.ok()) << init;
  Push(*original, {1, 2}, 0.5f);
  Push(*original, {3}, 1.0f);
  Push(*original, {4}, 1.5f);
  int64_t since = -1;
  const ShardRestore step2 = Checkpoint(*original, dir / "step-2.ckpt", 2, 0, &since);
  ASSERT_EQ(since, 0);
  EXPECT_EQ(ReadTable(step2.path()).rows, 4);

  Push(*original, {5, 6}, 2.0f);  // drops 1 and 2
  const ShardRestore step4 = Checkpoint(*original, dir / "step-4.ckpt", 4, 2, &since);
  ASSERT_EQ(since, 2);
  const FileTable inc4 = ReadTable(step4.path());
  EXPECT_THAT(inc4.keys, UnorderedElementsAreArray({5u, 6u}));
  ASSERT_TRUE(inc4.has_live_keys);
  EXPECT_THAT(inc4.live_keys, UnorderedElementsAreArray({3u, 4u, 5u, 6u}));

  Push(*original, {1}, -0.5f);  // drops 3; 1 comes back fresh
  const ShardRestore step6 = Checkpoint(*original, dir / "step-6.ckpt", 6, 4, &since);
  ASSERT_EQ(since, 4);
  const FileTable inc6 = ReadTable(step6.path());
  EXPECT_THAT(inc6.keys, UnorderedElementsAreArray({1u}));
  EXPECT_THAT(inc6.live_keys, UnorderedElementsAreArray({1u, 4u, 5u, 6u}));

  ShardRestore chain = step6;
  *chain.add_table_base() = step2;
  *chain.add_table_base() = step4;
  std::unique_ptr<PsShard> restored = Shard(Options(/*max_rows=*/4), &chain, &init);
  ASSERT_TRUE(init.ok()) << init;
  EXPECT_EQ(restored->Stats().tables(0).rows(), original->Stats().tables(0).rows());
  EXPECT_EQ(restored->Stats().tables(0).rows(), 4);
  // Row 1 as it came back after its eviction, not as the whole file has it.
  const std::vector<uint64_t> live = {1, 4, 5, 6};
  EXPECT_EQ(Pull(*restored, live), Pull(*original, live));
  EXPECT_EQ(Pull(*restored, live).second, 5);

  // Restoring only to step 4 drops 1 and 2 of the whole file.
  ShardRestore chain4 = step4;
  *chain4.add_table_base() = step2;
  std::unique_ptr<PsShard> at4 = Shard(Options(/*max_rows=*/4), &chain4, &init);
  ASSERT_TRUE(init.ok()) << init;
  EXPECT_EQ(at4->Stats().tables(0).rows(), 4);
  const FileTable whole = ReadTable(step2.path());
  EXPECT_THAT(whole.keys, UnorderedElementsAreArray({1u, 2u, 3u, 4u}));
}

}  // namespace
}  // namespace pstrain
