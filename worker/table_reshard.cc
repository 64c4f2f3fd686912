#include "worker/table_reshard.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/embedding_keys.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

size_t FloatsPerRow(const ShardCheckpointHeader::Table& t) { return static_cast<size_t>(t.dim()) * (1 + t.slots()); }

void AppendRow(const TableRows& from, size_t i, size_t floats, TableRows& to) {
  to.keys.push_back(from.keys[i]);
  to.updates.push_back(from.updates[i]);
  to.data.insert(to.data.end(), from.data.begin() + i * floats, from.data.begin() + (i + 1) * floats);
}

// Every new shard's (empty) tables as old shard 0's newest file lists them.
std::vector<std::vector<ReshardedTable>> EmptyTables(const ShardCheckpointView& first, int num_shards) {
  std::vector<ReshardedTable> tables;
  for (const ShardCheckpointTable& t : first.tables) {
    ReshardedTable r;
    r.header.set_name(t.name);
    r.header.set_dim(t.dim);
    r.header.set_slots(t.slots);
    tables.push_back(std::move(r));
  }
  return std::vector<std::vector<ReshardedTable>>(num_shards, tables);
}

// `file` lists the tables `expected` holds, in order, with their dims and
// slot counts.
absl::Status CheckSameTables(const DecodedShardCheckpoint& file, const std::vector<ReshardedTable>& expected) {
  const std::vector<ShardCheckpointTable>& tables = file.view.tables;
  for (size_t j = 0; j < std::max(tables.size(), expected.size()); ++j) {
    if (j >= tables.size() || j >= expected.size() || tables[j].name != expected[j].header.name() ||
        tables[j].dim != expected[j].header.dim() || tables[j].slots != expected[j].header.slots()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint ", file.path, " cannot be resharded: its embedding tables are not shard 0's (table ",
                       j, ": ", j < tables.size() ? tables[j].name : "none", " there, ",
                       j < expected.size() ? expected[j].header.name() : "none", " on shard 0)"));
    }
  }
  return absl::OkStatus();
}

// Deals old shard `shard`'s rows (after its `chain`) out to the new shards.
absl::Status DealShardRows(const std::vector<DecodedShardCheckpoint>& chain, int shard, int old_shards,
                           std::vector<std::vector<ReshardedTable>>& out) {
  const int num_shards = static_cast<int>(out.size());
  for (size_t j = 0; j < out[0].size(); ++j) {
    const ShardCheckpointHeader::Table& header = out[0][j].header;
    const ShardCheckpointTable* last = nullptr;
    PSTRAIN_ASSIGN_OR_RETURN(const TableRows rows, RowsAfterChain(chain, header.name(), &last));
    const size_t floats = FloatsPerRow(header);
    for (size_t i = 0; i < rows.keys.size(); ++i) {
      if (EmbeddingKeyShard(rows.keys[i], old_shards) != shard) {
        return absl::DataLossError(absl::StrCat("checkpoint ", chain.back().path, ": table ", header.name(),
                                                " holds key ", rows.keys[i], " of shard ",
                                                EmbeddingKeyShard(rows.keys[i], old_shards), ", not ", shard));
      }
      AppendRow(rows, i, floats, out[EmbeddingKeyShard(rows.keys[i], num_shards)][j].rows);
    }
    for (int s = 0; s < num_shards; ++s) {
      out[s][j].header.set_version(std::max(out[s][j].header.version(), last->version));
    }
  }
  return absl::OkStatus();
}

// Holds each new shard's tables to their share of max_rows.
void ApplyMaxRows(const std::vector<EmbeddingTableConfig>& tables, std::vector<std::vector<ReshardedTable>>& out) {
  std::map<std::string, int64_t> max_rows;
  for (const EmbeddingTableConfig& t : tables) max_rows[t.name()] = t.max_rows();
  const int64_t num_shards = static_cast<int64_t>(out.size());
  for (size_t s = 0; s < out.size(); ++s) {
    for (ReshardedTable& t : out[s]) {
      const int64_t limit = max_rows[t.header.name()];
      if (limit <= 0) continue;
      const int64_t dropped = KeepMostUpdated((limit + num_shards - 1) / num_shards, FloatsPerRow(t.header), t.rows);
      LOG_IF(WARNING, dropped > 0) << "resharding: table " << t.header.name() << " on shard " << s << " keeps its "
                                   << t.rows.keys.size() << " rows updated most often (max_rows " << limit << " over "
                                   << num_shards << " shards); " << dropped << " dropped";
    }
  }
}

}  // namespace

int64_t KeepMostUpdated(int64_t limit, size_t floats, TableRows& rows) {
  const size_t n = rows.keys.size();
  if (limit < 0 || static_cast<size_t>(limit) >= n) return 0;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  auto before = [&rows](size_t a, size_t b) {
    return rows.updates[a] != rows.updates[b] ? rows.updates[a] > rows.updates[b] : rows.keys[a] < rows.keys[b];
  };
  std::nth_element(order.begin(), order.begin() + limit, order.end(), before);
  std::vector<bool> keep(n, false);
  for (int64_t k = 0; k < limit; ++k) keep[order[k]] = true;
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!keep[i]) continue;
    rows.keys[kept] = rows.keys[i];
    rows.updates[kept] = rows.updates[i];
    std::memmove(rows.data.data() + kept * floats, rows.data.data() + i * floats, floats * sizeof(float));
    ++kept;
  }
  rows.keys.resize(kept);
  rows.updates.resize(kept);
  rows.data.resize(kept * floats);
  return static_cast<int64_t>(n - kept);
}

absl::StatusOr<std::vector<std::vector<ReshardedTable>>> ReshardTables(
    const std::vector<ShardRestore>& files, const std::vector<DecodedShardCheckpoint>& newest,
    const std::vector<EmbeddingTableConfig>& tables, int num_shards) {
  if (files.empty() || files.size() != newest.size() || num_shards <= 0) {
    return absl::InvalidArgumentError("ReshardTables: no shards, or not one decoded file per shard");
  }
  std::vector<std::vector<ReshardedTable>> out;
  for (size_t s = 0; s < files.size(); ++s) {
    if (s == 0) out = EmptyTables(newest[0].view, num_shards);
    PSTRAIN_RETURN_IF_ERROR(CheckSameTables(newest[s], out[0]));
    // One old shard's chain at a time (its links read, its newest file
    // copied): dropped before the next shard's links are read.
    PSTRAIN_ASSIGN_OR_RETURN(const std::vector<DecodedShardCheckpoint> chain,
                             ReadTableChain(files[s], newest[s], static_cast<int>(s)));
    PSTRAIN_RETURN_IF_ERROR(DealShardRows(chain, static_cast<int>(s), static_cast<int>(files.size()), out));
  }
  ApplyMaxRows(tables, out);
  for (std::vector<ReshardedTable>& shard : out) {
    for (ReshardedTable& t : shard) t.header.set_rows(static_cast<int64_t>(t.rows.keys.size()));
  }
  return out;
}

}  // namespace pstrain
