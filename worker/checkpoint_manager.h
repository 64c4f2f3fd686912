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
//
// Embedding tables (model.tables) are checkpointed incrementally: every
// `table_full_every`-th checkpoint's shard files hold every row, those
// between only the rows changed since the previous checkpoint; each shard
// file names the step it builds on (CheckpointManifest.ShardFile.
// tables_since_step). Restoring one reads its chain back to the whole file
// (each link checked as the file is; a damaged link makes the checkpoint
// damaged), and retention keeps every checkpoint a kept one builds on.
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
  int table_increments = 0;          // the longest chain of table increments
};

class CheckpointManager {
 public:
  // Null when the config asks for no checkpoints (no dir, no restore).
  // Creates `dir` and checks it is writable: an error naming it otherwise.
  // `parts`: the placement of the run's variables on `num_shards` shards.
  static absl::StatusOr<std::unique_ptr<CheckpointManager>> Create(const ExperimentConfig& config,
                                                                   std::vector<VariablePart> parts, int num_shards);

  // Also sets where the next checkpoint's tables build on: the point found
  // (none: the next checkpoint holds every row).
  absl::StatusOr<std::optional<RestorePoint>> FindRestorePoint();

  // Whether a checkpoint is due before training `step` (steps 1.. of this
  // run; never at the step the run started or resumed at).
  bool Due(int64_t step, absl::Time now) const;
  // The files each shard should write for a checkpoint at `step` (creating
  // its directory).
  absl::StatusOr<std::vector<std::string>> PrepareShardPaths(int64_t step) const;
  // The step the next checkpoint's tables build on (CheckpointRequest.
  // tables_since_step): the last one committed or restored, unless the run
  // has no tables or a whole one is due; 0: every row.
  int64_t TablesSinceStep() const;
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
  // Each shard's table_base in `point`: the files its file's tables build
  // on, found through the manifests of the checkpoints beside `dir`, each
  // checked against its size and CRC32C. DATA_LOSS naming a missing,
  // incomplete or damaged link.
  absl::Status AddTableChains(const std::string& dir, RestorePoint& point) const;
  void Prune() const;

  const ExperimentConfig config_;
  const std::vector<VariablePart> parts_;
  const int num_shards_;
  int64_t last_step_ = 0;
  absl::Time last_time_ = absl::InfinitePast();
  // The checkpoint the next one's tables may build on (0: none), and the
  // increments since its chain's whole checkpoint.
  int64_t table_base_step_ = 0;
  int table_increments_ = 0;
};

}  // namespace pstrain
