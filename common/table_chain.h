// Embedding tables' rows as a chain of shard checkpoint files holds them
// (common/shard_checkpoint_file.h): one file with every row, then
// increments (ShardCheckpointHeader.tables_since_step), each holding the
// rows created or updated since the file before it. Read by a shard
// restoring its tables (ps/embedding/sparse_tables.h) and by the chief
// resharding them onto another shard count (worker/table_reshard.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/shard_checkpoint_file.h"
#include "proto/ps.pb.h"

namespace pstrain {

// A table's rows: keys, update counts and, row by row, value and optimizer
// slots (dim x (1 + slots) floats each).
struct TableRows {
  std::vector<uint64_t> keys;
  std::vector<uint32_t> updates;
  std::vector<float> data;
};

// Table `t`'s rows as file bytes `data` hold them (the decoder checked sizes).
TableRows FileRows(const ShardCheckpointTable& t, const std::string& data);

// Table `name`'s rows after `chain` (the first file whole, each later one
// an increment on the one before): a row's last write wins, and an
// increment that lists the keys its table held (max_rows tables) drops the
// rows it does not list. `last` receives the table as the last file
// describes it (its version counts). FAILED_PRECONDITION naming the file
// when one lacks the table or gives it another dim or slot count.
absl::StatusOr<TableRows> RowsAfterChain(const std::vector<DecodedShardCheckpoint>& chain, const std::string& name,
                                         const ShardCheckpointTable** last);

// The file `restore` names, read whole (checked against its size and
// CRC32C: DATA_LOSS otherwise) and decoded.
absl::StatusOr<DecodedShardCheckpoint> ReadShardCheckpoint(const ShardRestore& restore);

// The files whose tables `last` (the file `restore` names, read) needs,
// `last` included: restore.table_base (a whole file, then increments) when
// its tables are an increment. Each link must be shard `shard`'s file of
// the step the next one builds on: DATA_LOSS naming the file otherwise.
absl::StatusOr<std::vector<DecodedShardCheckpoint>> ReadTableChain(const ShardRestore& restore,
                                                                   DecodedShardCheckpoint last, int shard);

}  // namespace pstrain
