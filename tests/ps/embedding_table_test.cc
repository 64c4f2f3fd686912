// EmbeddingTable on its own (ps/embedding/embedding_table.h) and the key
// mapping it shares with the workers (common/embedding_keys.h): rows that
// start from (seed, table, key) alone, updates that touch only the rows
// named, eviction by recency or frequency, and the memory it reports.
#include "ps/embedding/embedding_table.h"

#include <cmath>
#include <vector>

#include "common/embedding_keys.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

EmbeddingTableOptions Options(const std::string& optimizer, int dim = 4, int64_t max_rows = 0,
                              Eviction eviction = Eviction::kLeastRecentlyUsed) {
  EmbeddingTableOptions o;
  o.name = "t";
  o.dim = dim;
  o.init_scale = 0.5f;
  o.seed = 7;
  o.max_rows = max_rows;
  o.eviction = eviction;
  o.optimizer.set_name(optimizer);
  o.optimizer.set_learning_rate(0.1f);
  return o;
}

std::unique_ptr<EmbeddingTable> Make(const EmbeddingTableOptions& o) {
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> table = EmbeddingTable::Create(o);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *std::move(table) : nullptr;
}

std::vector<float> Row(EmbeddingTable& table, uint64_t key) {
  std::vector<float> row(table.dim());
  const uint64_t keys[] = {key};
  EXPECT_TRUE(table.Read(keys, row.data()).ok());
  return row;
}

std::vector<float> Initial(uint64_t key, int dim = 4) {
  std::vector<float> row(dim);
  InitialEmbeddingRow(7, EmbeddingTableDigest("t"), key, 0.5f, absl::MakeSpan(row));
  return row;
}

TEST(EmbeddingKeysTest, InitialRowsDependOnSeedTableAndKeyAlone) {
  std::vector<float> a = Initial(12), b = Initial(12), c = Initial(13), d(4);
  InitialEmbeddingRow(7, EmbeddingTableDigest("u"), 12, 0.5f, absl::MakeSpan(d));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  for (float v : a) {
    EXPECT_LE(std::abs(v), 0.5f);
  }
}

TEST(EmbeddingKeysTest, KeysSpreadEvenlyOverShardsAndFixedTablesStayInRange) {
  std::vector<int> per_shard(4);
  for (uint64_t key = 0; key < 100000; ++key) ++per_shard[EmbeddingKeyShard(key, 4)];
  for (int n : per_shard) {
    EXPECT_NEAR(n, 25000, 500);
  }
  EmbeddingTableConfig fixed;
  fixed.set_cardinality(10);
  std::vector<int> rows(10);
  for (uint64_t id = 0; id < 10000; ++id) {
    const uint64_t key = EmbeddingRowKey(fixed, id * 7919);
    ASSERT_LT(key, 10u);
    ++rows[key];
  }
  for (int n : rows) {
    EXPECT_GT(n, 800);
  }
  EmbeddingTableConfig dynamic;
  EXPECT_EQ(EmbeddingRowKey(dynamic, 123456789), 123456789u);
}

TEST(EmbeddingTableTest, RowsAppearOnFirstTouchWithTheirInitialValues) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("sgd"));
  EXPECT_EQ(table->rows(), 0);
  EXPECT_EQ(Row(*table, 42), Initial(42));
  EXPECT_EQ(Row(*table, uint64_t{1} << 40), Initial(uint64_t{1} << 40));
  EXPECT_EQ(table->rows(), 2);
  EXPECT_EQ(table->version(), 0);
}

TEST(EmbeddingTableTest, AnUpdateMovesOnlyTheRowsNamed) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("sgd"));
  Row(*table, 1);
  const std::vector<uint64_t> keys = {2, 3};
  const std::vector<float> grads = {1, 2, 3, 4, -1, -2, -3, -4};
  ASSERT_TRUE(table->Apply(keys, grads.data(), 0.5f, 0).ok());
  EXPECT_EQ(table->version(), 1);
  EXPECT_EQ(Row(*table, 1), Initial(1));
  const std::vector<float> two = Row(*table, 2), three = Row(*table, 3);
  for (int d = 0; d < 4; ++d) {
    EXPECT_FLOAT_EQ(two[d], Initial(2)[d] - 0.1f * 0.5f * grads[d]);
    EXPECT_FLOAT_EQ(three[d], Initial(3)[d] - 0.1f * 0.5f * grads[4 + d]);
  }
}

TEST(EmbeddingTableTest, OptimizerSlotsMoveOnlyWithTheirRow) {
  // Momentum: key 1 updated three times, key 2 once at the end. Key 2's
  // single update must be a first update (velocity from zero).
  std::unique_ptr<EmbeddingTable> table = Make(Options("momentum"));
  const std::vector<float> g = {1, 1, 1, 1};
  const uint64_t one[] = {1}, two[] = {2};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table->Apply(one, g.data(), 1.0f, i).ok());
  ASSERT_TRUE(table->Apply(two, g.data(), 1.0f, 3).ok());
  const std::vector<float> row2 = Row(*table, 2), row1 = Row(*table, 1);
  for (int d = 0; d < 4; ++d) {
    EXPECT_FLOAT_EQ(row2[d], Initial(2)[d] - 0.1f);
    // 1 + 1.9 + 2.71 velocity steps of 0.1 each.
    EXPECT_NEAR(row1[d], Initial(1)[d] - 0.1f * (1 + 1.9f + 2.71f), 1e-5);
  }
}

TEST(EmbeddingTableTest, LeastRecentlyTouchedRowIsDroppedAndComesBackFresh) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("sgd", 4, /*max_rows=*/4));
  const std::vector<float> g = {1, 1, 1, 1};
  const uint64_t two[] = {2};
  for (uint64_t k = 1; k <= 4; ++k) Row(*table, k);
  ASSERT_TRUE(table->Apply(two, g.data(), 1.0f, 0).ok());  // key 2 changed...
  Row(*table, 1);
  Row(*table, 3);
  Row(*table, 4);  // ...but 2 is now the least recently touched
  Row(*table, 5);
  EXPECT_EQ(table->rows(), 4);
  EXPECT_EQ(table->Stats().evicted_rows(), 1);
  EXPECT_EQ(Row(*table, 2), Initial(2));  // back, from its initial values
  EXPECT_EQ(table->Stats().evicted_rows(), 2);
}

TEST(EmbeddingTableTest, LeastOftenTouchedRowIsDropped) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("sgd", 4, /*max_rows=*/4, Eviction::kLeastOftenUsed));
  for (int i = 0; i < 3; ++i) Row(*table, 1);
  Row(*table, 2);
  for (int i = 0; i < 2; ++i) Row(*table, 3);
  for (int i = 0; i < 2; ++i) Row(*table, 4);
  Row(*table, 5);  // 2 is touched least often, though not least recently
  EXPECT_EQ(table->rows(), 4);
  const uint64_t rest[] = {1, 3, 4, 5};
  std::vector<float> out(16);
  const int64_t evicted = table->Stats().evicted_rows();
  ASSERT_TRUE(table->Read(rest, out.data()).ok());
  EXPECT_EQ(table->Stats().evicted_rows(), evicted);  // all still held
}

TEST(EmbeddingTableTest, ARequestOverTheLimitIsRefusedAndChangesNothing) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("sgd", 4, /*max_rows=*/2));
  const uint64_t keys[] = {1, 2, 3};
  std::vector<float> out(12);
  absl::Status s = table->Read(keys, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_rows 2"));
  EXPECT_EQ(table->rows(), 0);
}

TEST(EmbeddingTableTest, StatsCountRowsMemoryAndTraffic) {
  std::unique_ptr<EmbeddingTable> table = Make(Options("momentum", 8));
  std::vector<uint64_t> keys(1000);
  for (uint64_t i = 0; i < keys.size(); ++i) keys[i] = i * 31;
  std::vector<float> out(keys.size() * 8);
  ASSERT_TRUE(table->Read(keys, out.data()).ok());
  ASSERT_TRUE(table->Apply(absl::MakeSpan(keys).subspan(0, 10), out.data(), 1.0f, 0).ok());
  const TableStats stats = table->Stats();
  EXPECT_EQ(stats.name(), "t");
  EXPECT_EQ(stats.rows(), 1000);
  EXPECT_EQ(stats.pulled_rows(), 1000);
  EXPECT_EQ(stats.pushed_rows(), 10);
  EXPECT_EQ(stats.version(), 1);
  // Value + one momentum slot, 8 floats each, at least.
  EXPECT_GE(stats.bytes_per_row(), 2 * 8 * 4);
  EXPECT_GE(stats.bytes(), stats.rows() * 2 * 8 * 4);
}

TEST(EmbeddingTableTest, BadOptionsAreRefusedNamingTheTable) {
  EmbeddingTableOptions o = Options("sgd", 0);
  EXPECT_THAT(EmbeddingTable::Create(o).status().message(), HasSubstr("table 't': dim 0"));
  o = Options("no_such_optimizer");
  EXPECT_EQ(EmbeddingTable::Create(o).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pstrain
