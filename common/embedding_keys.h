// Embedding keys: where a feature id's row lives, and what it starts as.
//
// A table's row key is the feature id itself (a dynamic table, rows appear
// on first touch) or, for a fixed-size table of `cardinality` rows, the row
// the id hashes to. A key's shard is a hash of the key, independent of the
// dense variables' placement, so the rows spread evenly whatever the ids.
// A row's initial values depend on (seed, table name, key) alone: every run
// and every shard count gives the same values. Workers (routing) and shards
// (storage) both use these functions, so they agree by construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// The row key of feature `id` in `table`.
uint64_t EmbeddingRowKey(const EmbeddingTableConfig& table, uint64_t id);

// The shard (in [0, num_shards), num_shards > 0) that holds `key`'s row.
int EmbeddingKeyShard(uint64_t key, int num_shards);

// A stable 64-bit digest of a table's name (FNV-1a), part of every row's
// initial values.
uint64_t EmbeddingTableDigest(std::string_view table_name);

// The table's rows on the wire (its wire_dtype: fp32, fp16 or bf16).
WireDType EmbeddingWireDType(const EmbeddingTableConfig& table);

// The run's tables as workers and shards both use them: a table that names
// no wire_dtype gets the run's `compression` when that is fp16 or bf16
// (rows and their gradients travel 16-bit as the dense traffic does).
std::vector<EmbeddingTableConfig> RunEmbeddingTables(const ExperimentConfig& config);

// `key`'s initial row: row.size() values uniform in [-scale, scale], drawn
// from (seed, table_digest, key) alone.
void InitialEmbeddingRow(uint64_t seed, uint64_t table_digest, uint64_t key, float scale, absl::Span<float> row);

}  // namespace pstrain
