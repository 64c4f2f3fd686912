// A PS shard's checkpoint file: every variable's value, optimizer slots and
// version, in the layout ShardCheckpointHeader (proto/ps.proto) describes.
// Written durably (common/durable_file.h); read back only after its size and
// CRC32C match what the chief's manifest recorded.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "ps/embedding/sparse_tables.h"
#include "ps/variable/shard_variable.h"

namespace pstrain {

// Writes `variables` to `path`: a snapshot of each taken under its own lock
// (its published value, a copy of its slots), then written without locks,
// so updates go on meanwhile (async/ssp: each variable is consistent, the
// set of them not one global step). With `tables`, every embedding table's
// rows follow, copied at one instant: only those changed since this shard's
// checkpoint of `tables_since_step` when it is > 0 and the shard has it
// (SparseTables::TakeSnapshots); the response says which.
absl::StatusOr<CheckpointResponse> WriteShardCheckpoint(
    const std::string& path, int shard, int64_t step, const std::string& optimizer,
    const std::map<std::string, std::unique_ptr<ShardVariable>>& variables, SparseTables* tables = nullptr,
    int64_t tables_since_step = 0);

// Fills `variables` (values, slots, versions; already created from the Init
// request, not yet published) from the checkpoint `restore` names. Refused,
// changing nothing, when the file is damaged (DATA_LOSS) or holds other
// variables, shapes, shard or optimizer than `variables` (FAILED_PRECONDITION
// saying what differs). The embedding tables (`tables`; none when null)
// are replaced by the file's once everything else was checked: they must be
// the same tables (SparseTables::Restore). When the file's tables are an
// increment, `restore.table_base` names the files they build on, each
// checked as the file is; a missing or damaged link, or one of another
// step than the file before names, is DATA_LOSS naming it.
absl::Status LoadShardCheckpoint(const ShardRestore& restore, int shard, const std::string& optimizer,
                                 std::map<std::string, std::unique_ptr<ShardVariable>>& variables,
                                 SparseTables* tables = nullptr);

}  // namespace pstrain
