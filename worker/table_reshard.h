// Embedding tables of a PS checkpoint cut again for another shard count
// (docs/CHECKPOINTS.md, "Another shard count"): each old shard's rows, as
// its chain of files holds them (common/table_chain.h: a whole file, then
// increments), go to the shard that owns their key in the new layout
// (EmbeddingKeyShard). Rows, update counts and optimizer slots are copied,
// never recomputed, so a sync run continues bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_chain.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// One table's part on one new shard: `header` (name, dim, slots, rows,
// version) as a whole file's header lists it, and its rows.
struct ReshardedTable {
  ShardCheckpointHeader::Table header;
  TableRows rows;
};

// Per new shard (of `num_shards`), per table in the old files' order: the
// rows of the tables of `files` (one per old shard, in shard order, each
// with its table_base when its tables are an increment), whose files
// `newest` holds already read and decoded (the links of the chains are
// read here). A table's version
// is the highest any old shard reached (a sync run's shards all reached
// the step's). A table of `tables` with max_rows keeps, per new shard, at
// most ceil(max_rows / num_shards) rows, as its shards would: the ones
// updated most often (ties: the lower key); the rows dropped are logged.
// DATA_LOSS when a file is damaged, a link of a chain is missing or of
// another step, or a row lies on a shard that does not own its key;
// FAILED_PRECONDITION naming the file when the old shards list other
// tables, dims or slot counts.
absl::StatusOr<std::vector<std::vector<ReshardedTable>>> ReshardTables(
    const std::vector<ShardRestore>& files, const std::vector<DecodedShardCheckpoint>& newest,
    const std::vector<EmbeddingTableConfig>& tables, int num_shards);

// Keeps the `limit` rows of `rows` (`floats` floats each) updated most
// often (ties: the lower key), in their order; returns how many it dropped.
int64_t KeepMostUpdated(int64_t limit, size_t floats, TableRows& rows);

}  // namespace pstrain
