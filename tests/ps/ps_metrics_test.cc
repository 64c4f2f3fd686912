// PsMetrics (ps/ps_metrics.h) for embedding tables: one series per table,
// labelled {shard, table}, brought up to the shard's Stats; counters only
// advance.
#include "ps/ps_metrics.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The value of the sample `series` (name and labels as rendered), or -1.
double Sample(const std::string& text, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, series + " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line, &v)) return v;
  }
  return -1;
}

TableStats Table(const std::string& name, int64_t rows, int64_t evicted) {
  TableStats t;
  t.set_name(name);
  t.set_rows(rows);
  t.set_bytes(rows * 100);
  t.set_evicted_rows(evicted);
  t.set_pulled_rows(rows * 3);
  t.set_pushed_rows(rows * 2);
  return t;
}

TEST(PsMetricsTest, EveryTableHasItsOwnSeries) {
  MetricRegistry registry;
  absl::StatusOr<std::unique_ptr<PsMetrics>> metrics = PsMetrics::Register(&registry, 1, {"ads", "users"});
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  StatsResponse stats;
  (*metrics)->Update(stats);  // before Init: no tables listed yet
  *stats.add_tables() = Table("ads", 7, 2);
  *stats.add_tables() = Table("users", 40, 0);
  (*metrics)->Update(stats);
  const std::string text = registry.RenderText();
  EXPECT_EQ(Sample(text, "pstrain_ps_table_rows{shard=\"1\",table=\"ads\"}"), 7) << text;
  EXPECT_EQ(Sample(text, "pstrain_ps_table_rows{shard=\"1\",table=\"users\"}"), 40) << text;
  EXPECT_EQ(Sample(text, "pstrain_ps_table_bytes{shard=\"1\",table=\"users\"}"), 4000) << text;
  EXPECT_EQ(Sample(text, "pstrain_ps_table_evicted_rows_total{shard=\"1\",table=\"ads\"}"), 2) << text;
  EXPECT_EQ(Sample(text, "pstrain_ps_table_pulled_rows_total{shard=\"1\",table=\"ads\"}"), 21) << text;
  EXPECT_EQ(Sample(text, "pstrain_ps_table_pushed_rows_total{shard=\"1\",table=\"users\"}"), 80) << text;
  // Rows may shrink (eviction); the counters do not go back.
  stats.mutable_tables(0)->set_rows(5);
  stats.mutable_tables(0)->set_pulled_rows(30);
  (*metrics)->Update(stats);
  const std::string later = registry.RenderText();
  EXPECT_EQ(Sample(later, "pstrain_ps_table_rows{shard=\"1\",table=\"ads\"}"), 5) << later;
  EXPECT_EQ(Sample(later, "pstrain_ps_table_pulled_rows_total{shard=\"1\",table=\"ads\"}"), 30) << later;
}

}  // namespace
}  // namespace pstrain
