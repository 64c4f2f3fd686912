// Embedding tables cut again for another shard count (worker/table_reshard.h)
// from shard files the test writes: every row lands, unchanged, on the
// shard that owns its key in the new layout; a chain's increments win over
// the whole file they build on; max_rows keeps the rows updated most often;
// a row on a shard that does not own it, or shards listing other tables,
// are refused naming the file.
#include "worker/table_reshard.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/durable_file.h"
#include "common/embedding_keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/process_test_util.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

constexpr int kDim = 2;
constexpr int kSlots = 1;
constexpr size_t kFloats = kDim * (1 + kSlots);

// A table's part in a file the test writes.
struct TestTable {
  std::string name = "ads";
  int64_t version = 0;
  TableRows rows;
};

// Row `key` with update count `updates`: every float key + 0.25 x its index.
void AddRow(uint64_t key, uint32_t updates, TableRows& rows) {
  rows.keys.push_back(key);
  rows.updates.push_back(updates);
  for (size_t f = 0; f < kFloats; ++f) rows.data.push_back(static_cast<float>(key) + 0.25f * f);
}

// Shard `shard`'s file of `step` at `path`, its tables built on `since`.
ShardRestore WriteShard(const std::string& path, int shard, int64_t step, int64_t since,
                        const std::vector<TestTable>& tables) {
  ShardCheckpointHeader header;
  header.set_shard(shard);
  header.set_step(step);
  header.set_optimizer("adagrad");
  header.set_tables_since_step(since);
  for (const TestTable& t : tables) {
    ShardCheckpointHeader::Table* h = header.add_tables();
    h->set_name(t.name);
    h->set_dim(kDim);
    h->set_slots(kSlots);
    h->set_rows(static_cast<int64_t>(t.rows.keys.size()));
    h->set_version(t.version);
  }
  absl::StatusOr<DurableFileWriter> writer = DurableFileWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(AppendShardCheckpointHeader(*writer, header).ok());
  for (const TestTable& t : tables) {
    EXPECT_TRUE(writer->Append(t.rows.keys.data(), t.rows.keys.size() * sizeof(uint64_t)).ok());
    EXPECT_TRUE(writer->Append(t.rows.updates.data(), t.rows.updates.size() * sizeof(uint32_t)).ok());
    EXPECT_TRUE(writer->Append(t.rows.data.data(), t.rows.data.size() * sizeof(float)).ok());
  }
  absl::StatusOr<FileDigest> digest = writer->Commit();
  EXPECT_TRUE(digest.ok()) << digest.status();
  ShardRestore r;
  r.set_path(path);
  r.set_bytes(digest.ok() ? digest->bytes : 0);
  r.set_crc32c(digest.ok() ? digest->crc32c : 0);
  r.set_step(step);
  return r;
}

// ReshardTables over `files`, each read as the chief reads it first.
absl::StatusOr<std::vector<std::vector<ReshardedTable>>> Reshard(const std::vector<ShardRestore>& files,
                                                                 const std::vector<EmbeddingTableConfig>& tables,
                                                                 int num_shards) {
  std::vector<DecodedShardCheckpoint> newest;
  for (const ShardRestore& f : files) {
    absl::StatusOr<DecodedShardCheckpoint> file = ReadShardCheckpoint(f);
    if (!file.ok()) return file.status();
    newest.push_back(*std::move(file));
  }
  return ReshardTables(files, newest, tables, num_shards);
}

// Keys 0..n-1 dealt to their shards of `shards`, update count key % 5.
std::vector<TestTable> DealKeys(int n, int shards, int64_t version_base) {
  std::vector<TestTable> tables(shards);
  for (int s = 0; s < shards; ++s) tables[s].version = version_base + s;
  for (int key = 0; key < n; ++key) AddRow(key, key % 5, tables[EmbeddingKeyShard(key, shards)].rows);
  return tables;
}

// Every resharded row by key: (new shard, its floats).
std::map<uint64_t, std::pair<int, std::vector<float>>> RowsByKey(
    const std::vector<std::vector<ReshardedTable>>& shards) {
  std::map<uint64_t, std::pair<int, std::vector<float>>> rows;
  for (size_t s = 0; s < shards.size(); ++s) {
    const TableRows& r = shards[s].at(0).rows;
    for (size_t i = 0; i < r.keys.size(); ++i) {
      EXPECT_TRUE(rows.count(r.keys[i]) == 0) << "key " << r.keys[i] << " twice";
      rows[r.keys[i]] = {static_cast<int>(s),
                         std::vector<float>(r.data.begin() + i * kFloats, r.data.begin() + (i + 1) * kFloats)};
    }
  }
  return rows;
}

TEST(TableReshardTest, EveryRowLandsUnchangedOnTheShardThatOwnsItsKeyNow) {
  test::TempDir dir;
  const std::vector<TestTable> old = DealKeys(40, 2, /*version_base=*/5);
  const std::vector<ShardRestore> files = {WriteShard(dir / "s0", 0, 6, 0, {old[0]}),
                                           WriteShard(dir / "s1", 1, 6, 0, {old[1]})};
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> out = Reshard(files, {}, 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  const auto rows = RowsByKey(*out);
  ASSERT_EQ(rows.size(), 40u);
  for (const auto& [key, at] : rows) {
    EXPECT_EQ(at.first, EmbeddingKeyShard(key, 3)) << key;
    EXPECT_EQ(at.second[3], static_cast<float>(key) + 0.75f) << key;
  }
  for (const std::vector<ReshardedTable>& shard : *out) {
    EXPECT_EQ(shard[0].header.name(), "ads");
    EXPECT_EQ(shard[0].header.version(), 6);  // the highest of the old shards'
    EXPECT_EQ(shard[0].header.rows(), static_cast<int64_t>(shard[0].rows.keys.size()));
  }
}

TEST(TableReshardTest, AnIncrementsRowsWinOverTheWholeFileItBuildsOn) {
  test::TempDir dir;
  const std::vector<TestTable> old = DealKeys(20, 1, 3);
  ShardRestore base = WriteShard(dir / "whole", 0, 2, 0, {old[0]});
  TestTable changed;
  changed.version = 4;
  AddRow(7, 9, changed.rows);
  changed.rows.data.assign(kFloats, -1.0f);
  ShardRestore last = WriteShard(dir / "increment", 0, 4, /*since=*/2, {changed});
  *last.add_table_base() = base;
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> out = Reshard({last}, {}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  const auto rows = RowsByKey(*out);
  ASSERT_EQ(rows.size(), 20u);
  EXPECT_EQ(rows.at(7).second, std::vector<float>(kFloats, -1.0f));
  EXPECT_EQ(rows.at(8).second[0], 8.0f);
  EXPECT_EQ((*out)[0][0].header.version(), 4);

  // The increment alone, its base missing from the restore: refused.
  ShardRestore alone = last;
  alone.clear_table_base();
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> broken = Reshard({alone}, {}, 2);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss) << broken.status();
}

TEST(TableReshardTest, MaxRowsKeepsEachNewShardsShareUpdatedMostOften) {
  test::TempDir dir;
  const std::vector<TestTable> old = DealKeys(20, 2, 1);
  const std::vector<ShardRestore> files = {WriteShard(dir / "s0", 0, 2, 0, {old[0]}),
                                           WriteShard(dir / "s1", 1, 2, 0, {old[1]})};
  EmbeddingTableConfig config;
  config.set_name("ads");
  config.set_max_rows(8);  // onto 1 shard: 8 of the 20 rows
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> out = Reshard(files, {config}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  const TableRows& kept = (*out)[0][0].rows;
  ASSERT_EQ(kept.keys.size(), 8u);
  EXPECT_EQ((*out)[0][0].header.rows(), 8);
  // Update counts key % 5: the four rows with 4 updates and the four with 3.
  std::vector<uint64_t> keys(kept.keys.begin(), kept.keys.end());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<uint64_t>{3, 4, 8, 9, 13, 14, 18, 19}));
  for (size_t i = 0; i < kept.keys.size(); ++i) {
    EXPECT_EQ(kept.data[i * kFloats], static_cast<float>(kept.keys[i])) << "a row's floats stay with its key";
  }
}

TEST(TableReshardTest, KeepMostUpdatedBreaksTiesByTheLowerKeyAndKeepsTheOrder) {
  TableRows rows;
  for (uint64_t key : {9, 2, 7, 4}) AddRow(key, 1, rows);
  EXPECT_EQ(KeepMostUpdated(2, kFloats, rows), 2);
  EXPECT_EQ(rows.keys, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(rows.data.size(), 2 * kFloats);
  EXPECT_EQ(rows.data[kFloats], 4.0f);
  EXPECT_EQ(KeepMostUpdated(5, kFloats, rows), 0);
}

TEST(TableReshardTest, ARowOnAShardThatDoesNotOwnItsKeyIsDataLossNamingTheFile) {
  test::TempDir dir;
  std::vector<TestTable> old = DealKeys(20, 2, 1);
  std::swap(old[0], old[1]);
  const std::vector<ShardRestore> files = {WriteShard(dir / "s0", 0, 2, 0, {old[0]}),
                                           WriteShard(dir / "s1", 1, 2, 0, {old[1]})};
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> out = Reshard(files, {}, 3);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDataLoss) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr(dir / "s0"));
}

TEST(TableReshardTest, ShardsListingOtherTablesAreRefusedNamingTheFile) {
  test::TempDir dir;
  std::vector<TestTable> old = DealKeys(20, 2, 1);
  old[1].name = "users";
  const std::vector<ShardRestore> files = {WriteShard(dir / "s0", 0, 2, 0, {old[0]}),
                                           WriteShard(dir / "s1", 1, 2, 0, {old[1]})};
  absl::StatusOr<std::vector<std::vector<ReshardedTable>>> out = Reshard(files, {}, 3);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_THAT(out.status().message(), HasSubstr(dir / "s1"));
  EXPECT_THAT(out.status().message(), HasSubstr("users"));
}

}  // namespace
}  // namespace pstrain
