// The file a PS shard writes for a checkpoint (docs/CHECKPOINTS.md), read
// and written here for the shards (ps/shard/shard_checkpoint.h) and for the chief,
// which reshards a checkpoint onto another shard count
// (worker/checkpoint_reshard.h):
//
//   "PSTRCKPT"  uint32 header length  ShardCheckpointHeader (proto/ps.proto)
//   then for each header entry, in order: its value and each of its optimizer
//   slots, float32, as many elements as its shape holds; then for each
//   embedding table (header.tables), in order: its keys, its rows' update
//   counts and its rows (ShardCheckpointHeader.Table says how), then, in an
//   increment of a table with max_rows, every key the table held.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/durable_file.h"
#include "common/tensor.h"
#include "proto/ps.pb.h"

namespace pstrain {

// One entry of a decoded file: where its arrays lie in the file's bytes.
struct ShardCheckpointEntry {
  std::string name;
  Shape shape;
  int64_t version = 0;
  int slots = 0;
  int64_t elements = 0;  // of the value and of each slot
  size_t offset = 0;     // of the value; slot k follows at offset + (k + 1) x elements x 4
  // Where array k lies in the file (0: the value, 1..: the slots); copy it
  // out with memcpy (the file does not align floats).
  size_t ArrayOffset(int k) const { return offset + static_cast<size_t>(k) * elements * sizeof(float); }
};

// One embedding table of a decoded file: where its arrays lie.
struct ShardCheckpointTable {
  std::string name;
  int dim = 0;
  int slots = 0;
  int64_t rows = 0;
  int64_t version = 0;
  size_t keys_offset = 0;       // rows x uint64
  size_t updates_offset = 0;    // rows x uint32
  size_t data_offset = 0;       // rows x dim x (1 + slots) float32, row by row
  int64_t live_keys = -1;       // an increment's keys held (max_rows tables); -1: none listed
  size_t live_keys_offset = 0;  // live_keys x uint64
};

struct ShardCheckpointView {
  ShardCheckpointHeader header;
  std::vector<ShardCheckpointEntry> entries;  // header order
  std::vector<ShardCheckpointTable> tables;   // header order
};

// A shard file read whole and decoded (`view` points into `data`).
struct DecodedShardCheckpoint {
  std::string path;
  std::string data;
  ShardCheckpointView view;
};

// Decodes a whole file's bytes (`path` names it in errors). DATA_LOSS when
// it is not a shard checkpoint, its header is malformed, an entry or table
// is listed twice or has a negative version, dimension, row or slot count
// (a table's dim outside [1, 4096]), or the file's size is not what the
// header describes.
absl::StatusOr<ShardCheckpointView> DecodeShardCheckpoint(const std::string& data, const std::string& path);

// Writes the magic and `header` to `writer`; the arrays follow, appended by
// the caller in header order.
absl::Status AppendShardCheckpointHeader(DurableFileWriter& writer, const ShardCheckpointHeader& header);

}  // namespace pstrain
