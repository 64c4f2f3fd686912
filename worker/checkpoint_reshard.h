// Resharding: a PS checkpoint restored onto another number of shards or
// another placement (docs/CHECKPOINTS.md, "Another shard count"). The chief
// reads every shard file of the checkpoint, puts each variable back
// together from its parts there (values, optimizer slots, version) and cuts
// it again as this run places it, writing one file per new shard and a
// MANIFEST into a directory of its own; the shards then restore from it as
// from any checkpoint. Embedding tables go with it: each row to the shard
// that owns its key in the new layout (worker/table_reshard.h), written
// whole. Values and slots are copied, never recomputed, so a sync run
// continues bit for bit as it would have on the old shards.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/placement.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// Rewrites the checkpoint in directory `from` (`manifest`, its MANIFEST;
// `files`, its shard files as the manifest lists them) for `parts` on
// `num_shards` shards into directory `to` (created; what it held is
// replaced) and returns the new MANIFEST, already written there. Every
// shard file is checked against its size and CRC32C where it is read; a
// file whose tables are an increment brings its table_base (ReshardTables;
// `tables`, the run's, give their max_rows).
// FAILED_PRECONDITION naming the variable when the variables differ (a name
// on one side only, or another element count); DATA_LOSS when a file is
// damaged or lacks a part the manifest lists.
absl::StatusOr<CheckpointManifest> ReshardCheckpoint(const std::string& from, const CheckpointManifest& manifest,
                                                     const std::vector<ShardRestore>& files,
                                                     const std::vector<VariablePart>& parts,
                                                     const std::vector<EmbeddingTableConfig>& tables, int num_shards,
                                                     const std::string& to);

}  // namespace pstrain
