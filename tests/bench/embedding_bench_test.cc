// pstrain-bench embedding on a tiny real cluster (embedding_bench.h): every
// figure finite and positive, and the rows the clients pulled and pushed
// are exactly the rows the shards counted; bad options refused by name. No
// speed thresholds (timings are the benchmark's, not the tests').
#include "tools/bench/embedding_bench.h"

#include <cmath>

#include "absl/strings/match.h"
#include "common/transport/transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::bench {
namespace {

using ::testing::HasSubstr;

EmbeddingBenchOptions Tiny(const std::string& transport) {
  EmbeddingBenchOptions o;
  o.servers = 2;
  o.workers = 2;
  o.batch_size = 32;
  o.features = 4;
  o.dim = 4;
  o.cardinality = 1000;
  o.seconds = 0.2;
  o.warmup_rounds = 1;
  o.transport = transport;
  o.optimizer = "adagrad";
  return o;
}

void ExpectSane(const EmbeddingBenchOptions& o, const EmbeddingBenchResult& r) {
  for (double v : {r.table_lookups_per_sec, r.table_updates_per_sec, r.map_lookups_per_sec, r.map_updates_per_sec,
                   r.lookup_ratio, r.update_ratio, r.pulled_rows_per_sec, r.pushed_rows_per_sec, r.sparse_gbps}) {
    EXPECT_TRUE(std::isfinite(v) && v > 0) << v;
  }
  EXPECT_GT(r.rounds, 0);
  EXPECT_GT(r.unique_fraction, 0);
  EXPECT_LE(r.unique_fraction, 1);
  ASSERT_EQ(r.shards.size(), static_cast<size_t>(o.servers));
  int64_t pulled = 0, pushed = 0, rows = 0;
  for (const TableStats& t : r.shards) {
    pulled += t.pulled_rows();
    pushed += t.pushed_rows();
    rows += t.rows();
    EXPECT_GT(t.rows(), 0) << "a shard held no rows: keys are not spread";
    EXPECT_GE(t.bytes_per_row(), o.dim * 4 * 2);  // value and adagrad's accumulator
  }
  EXPECT_EQ(pulled, r.client_pulled_rows);
  EXPECT_EQ(pushed, r.client_pushed_rows);
  // No more distinct ids than the features' ranks.
  EXPECT_LE(rows, static_cast<int64_t>(o.features) * o.cardinality);
  const std::string json = FormatEmbeddingBenchJson(o, r);
  for (const char* key : {"\"lookup_ratio\":", "\"pulled_rows_per_sec\":", "\"sparse_gbps\":", "\"rows\":"}) {
    EXPECT_TRUE(absl::StrContains(json, key)) << key << " in " << json;
  }
  EXPECT_THAT(FormatEmbeddingBenchTable(o, r), HasSubstr("hash map"));
}

TEST(EmbeddingBenchTest, OverGrpcRowsAreCountedExactlyByClientsAndShards) {
  const EmbeddingBenchOptions o = Tiny("grpc");
  absl::StatusOr<EmbeddingBenchResult> r = RunEmbeddingBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(o, *r);
}

TEST(EmbeddingBenchTest, OverUcxWithBf16Rows) {
  if (!TransportRegistry().Find("ucx").ok()) GTEST_SKIP() << "this build has no ucx transport";
  EmbeddingBenchOptions o = Tiny("ucx");
  o.wire_dtype = "bf16";
  absl::StatusOr<EmbeddingBenchResult> r = RunEmbeddingBench(o);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSane(o, *r);
}

TEST(EmbeddingBenchTest, BadOptionsAreRefusedByName) {
  EmbeddingBenchOptions o = Tiny("grpc");
  o.dim = 0;
  EXPECT_THAT(ValidateEmbeddingBenchOptions(o).message(), HasSubstr("--dim"));
  o = Tiny("carrier_pigeon");
  EXPECT_THAT(ValidateEmbeddingBenchOptions(o).message(), HasSubstr("--transport 'carrier_pigeon'"));
  o = Tiny("grpc");
  o.zipf = 0;
  EXPECT_THAT(RunEmbeddingBench(o).status().message(), HasSubstr("--zipf"));
}

}  // namespace
}  // namespace pstrain::bench
