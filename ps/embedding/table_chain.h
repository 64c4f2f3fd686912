// A table's rows as a chain of checkpoint files holds them: one file with
// every row, then increments (ShardCheckpointHeader.tables_since_step), each
// holding the rows created or updated since the file before it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/shard_checkpoint_file.h"
#include "ps/embedding/embedding_table.h"

namespace pstrain {

// Table `t`'s rows as file `file` holds them (the decoder checked sizes).
EmbeddingTable::Rows FileRows(const ShardCheckpointTable& t, const std::string& data);

// Table `name`'s rows after `chain` (the first file whole, each later one
// an increment on the one before): a row's last write wins, and an
// increment that lists the keys its table held (max_rows tables) drops the
// rows it does not list. `last` receives the table as the last file
// describes it (its version counts). FAILED_PRECONDITION naming the file
// when one lacks the table or gives it another dim or slot count.
absl::StatusOr<EmbeddingTable::Rows> RowsAfterChain(const std::vector<DecodedShardCheckpoint>& chain,
                                                    const std::string& name, const ShardCheckpointTable** last);

}  // namespace pstrain
