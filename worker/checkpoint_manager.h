// CheckpointManager: the chief's side of checkpoints (config `checkpoint:`).
//
// Layout: <dir>/ckpt-<step>/ holds one file per PS shard
// ("shard-<s>-of-<n>.ckpt", written by the shard) and MANIFEST (a
// CheckpointManifest, proto/ps.proto), which the chief writes durably only
// after every shard has answered: a directory without a MANIFEST is an
// incomplete checkpoint and never used. After each commit, committed
// checkpoints beyond `keep` are deleted, oldest first (and incomplete ones
// older than the newest committed).
//
// Resuming: FindRestorePoint picks `restore` when given, otherwise the
// newest committed checkpoint in `dir`. Every shard file is read and checked
// against the size and CRC32C in the manifest first; a damaged checkpoint is
// skipped for the previous one, saying why (an explicit `restore` that is
// damaged is an error). A checkpoint of another model or optimizer is
// refused with what differs: resuming it would be wrong, not merely old. One
// of the same variables written by another number of shards, or under
// another placement, is resharded for this run first
// (worker/checkpoint_reshard.h), into <checkpoint>/reshard-<n>-shards/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/placement.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

struct RestorePoint {
  std::string dir;  // the checkpoint directory
  CheckpointManifest manifest;
  std::vector<ShardRestore> shards;  // what each shard's Init restores
};

class CheckpointManager {
 public:
  // Null when the config asks for no checkpoints (no dir, no restore).
  // Creates `dir` and checks it is writable: an error naming it otherwise.
  // `parts`: the placement of the run's variables on `num_shards` shards.
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(const ExperimentConfig& config,
                                                                   std::vector<VariablePart> parts, int num_shards);

  absl::StatusOr<std::optional<RestorePoint>> FindRestorePoint() const;

  // Whether a checkpoint is due before training `step` (steps 1.. of this
  // run; never at the step the run started or resumed at).
  bool Due(int64_t step, absl::Time now) const;
  // The files each shard should write for a checkpoint at `step` (creating
  // its directory).
  absl::StatusOr<std::vector<std::string>> PrepareShardPaths(int64_t step) const;
  // Writes the MANIFEST of the checkpoint at `step` from the shards'
  // answers (and, with data.sharding dynamic, the ledger's chunks completed
  // by then), then deletes what `keep` no longer covers.
  absl::Status Commit(int64_t step, const std::vector<CheckpointResponse>& shards, absl::Time now,
                      const LedgerState* ledger = nullptr);
  void MarkStart(int64_t step, absl::Time now) {
    last_step_ = step;
    last_time_ = now;
  }

  const std::string& dir() const { return config_.checkpoint().dir(); }

 private:
  CheckpointManager(const ExperimentConfig& config, std::vector<VariablePart> parts, int num_shards)
      : config_(config), parts_(std::move(parts)), num_shards_(num_shards) {}
  std::string CheckpointDir(int64_t step) const;
  // The manifest describing this run at `step` (without shard files).
  CheckpointManifest Describe(int64_t step) const;
  // "" when `manifest` holds this run's variables (model, optimizer, every
  // variable's elements); otherwise what differs.
  std::string Incompatibility(const CheckpointManifest& manifest) const;
  // The manifest's shards and parts are this run's (else it is resharded:
  // worker/checkpoint_reshard.h).
  bool SameLayout(const CheckpointManifest& manifest) const;
  // The manifest's shard files in `dir`, one per shard, each a plain name
  // in `dir`: DATA_LOSS naming what is wrong. Their contents are checked
  // against size and CRC32C where they are read (Load, resharding).
  absl::StatusOr<std::vector<ShardRestore>> ShardFiles(const std::string& dir,
                                                       const CheckpointManifest& manifest) const;
  // Reads and checks the checkpoint in `dir`: DATA_LOSS if damaged or
  // incomplete, FAILED_PRECONDITION if it does not fit this run.
  absl::StatusOr<RestorePoint> Load(const std::string& dir) const;
  void Prune() const;

  const ExperimentConfig config_;
  const std::vector<VariablePart> parts_;
  const int num_shards_;
  int64_t last_step_ = 0;
  absl::Time last_time_ = absl::InfinitePast();
};

}  // namespace pstrain
