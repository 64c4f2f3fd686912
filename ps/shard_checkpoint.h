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
#include "ps/shard_variable.h"

namespace pstrain {

// Writes `variables` (each under its own lock, one at a time) to `path`.
absl::StatusOr<CheckpointResponse> WriteShardCheckpoint(
    const std::string& path, int shard, int64_t step, const std::string& optimizer,
    const std::map<std::string, std::unique_ptr<ShardVariable>>& variables);

// Fills `variables` (values, slots, versions; already created from the Init
// request, not yet published) from the checkpoint `restore` names. Refused,
// changing nothing, when the file is damaged (DATA_LOSS) or holds other
// variables, shapes, shard or optimizer than `variables` (FAILED_PRECONDITION
// saying what differs).
absl::Status LoadShardCheckpoint(const ShardRestore& restore, int shard, const std::string& optimizer,
                                 std::map<std::string, std::unique_ptr<ShardVariable>>& variables);

}  // namespace pstrain
