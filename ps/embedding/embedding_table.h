// EmbeddingTable: one shard's part of an embedding table -- rows of `dim`
// floats keyed by 64-bit row keys (common/embedding_keys.h), each with its
// optimizer's slots, created on first touch with their deterministic
// initial values.
//
// Reads and updates touch only the rows named: an update runs the table's
// optimizer (optim/) over each named row alone, so its slots move only when
// the row is touched (adagrad, ftrl; adam is lazy Adam: a row's bias
// correction counts that row's own updates).
//
// With `max_rows`, a request that would pass the limit first drops the least
// recently touched (lru) or least often touched (lfu, ties: least recently)
// rows not named by the request, max_rows / 64 beyond what it needs (at least
// one), so the selection's cost is spread over many inserts. A dropped row
// that is touched again starts from its initial values.
//
// Not thread-safe: the owner (SparseTables) serialises every call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/table_chain.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

enum class Eviction { kLeastRecentlyUsed, kLeastOftenUsed };

struct EmbeddingTableOptions {
  std::string name;
  int dim = 16;
  float init_scale = 0.01f;
  uint64_t seed = 0;
  // Rows this shard's part may hold; 0: no limit.
  int64_t max_rows = 0;
  Eviction eviction = Eviction::kLeastRecentlyUsed;
  OptimizerConfig optimizer;
  // Global steps of the run (learning-rate schedules); 0: unknown.
  int64_t total_steps = 0;
};

class EmbeddingTable {
 public:
  // NotFound for an unknown optimizer or schedule; InvalidArgument for a
  // dim outside [1, 4096] or a negative max_rows.
  static absl::StatusOr<std::unique_ptr<EmbeddingTable>> Create(const EmbeddingTableOptions& options);

  int dim() const { return options_.dim; }
  const std::string& name() const { return options_.name; }
  // Updates applied (Apply calls).
  int64_t version() const { return version_; }
  int64_t rows() const { return static_cast<int64_t>(index_.size()); }

  // Copies the rows of `keys` (no repeats) into `out` (keys.size() * dim
  // floats, in key order), creating the missing ones. InvalidArgument when
  // the keys alone are more than max_rows.
  absl::Status Read(absl::Span<const uint64_t> keys, float* out);
  // One update: each key's row moves by its gradient row (`grads`,
  // keys.size() * dim floats, scaled by `gradient_scale`) at the learning
  // rate of `global_step`. Missing rows are created first. The version goes
  // up by one. InvalidArgument as for Read.
  absl::Status Apply(absl::Span<const uint64_t> keys, const float* grads, float gradient_scale, int64_t global_step);

  // This part's figures (rows, memory per row and in all, rows dropped,
  // rows read and updated so far, version).
  TableStats Stats() const;

  // Rows for a checkpoint: keys, update counts and, row by row, value and
  // optimizer slots (FloatsPerRow() floats each).
  using Rows = TableRows;
  // Every row, or with `changed_after` (a version() this table had) only the
  // rows created or updated since: an incremental checkpoint's. A row created
  // and not yet updated counts as changed, so that a row dropped (max_rows)
  // and created again replaces its older values.
  Rows Export(std::optional<int64_t> changed_after = std::nullopt) const;
  // Every row's key (any order).
  std::vector<uint64_t> Keys() const;
  int num_slots() const { return optimizer_->num_slots(); }
  // Replaces every row with `rows` (as Export wrote them; keys distinct)
  // and the version with `version`. InvalidArgument, changing nothing, when
  // the sizes do not fit this table or the rows pass max_rows.
  absl::Status Import(const Rows& rows, int64_t version);
  // Import's checks alone.
  absl::Status CheckImport(const Rows& rows) const;

 private:
  struct RowMeta {
    uint64_t key = 0;
    uint64_t last_touch = 0;  // the tick of the request that last named it
    uint32_t touches = 0;     // requests that named it
    uint32_t updates = 0;     // updates applied to it
    int64_t changed_at = 0;   // the version that created or last updated it
  };
  // Rows live in blocks of kBlockRows, so growing never moves a row.
  static constexpr int64_t kBlockRows = 1 << 14;

  EmbeddingTable(const EmbeddingTableOptions& options, std::unique_ptr<Optimizer> optimizer,
                 LearningRateSchedule schedule);
  // The slot of every key's row (in key order), touched by this request's
  // tick; creates missing rows, evicting first when they would pass
  // max_rows.
  absl::StatusOr<std::vector<uint32_t>> Touch(absl::Span<const uint64_t> keys);
  // Drops `count` rows not touched by the current tick (the eviction
  // policy's victims) and frees their slots.
  void Evict(int64_t count);
  // A free slot for `key`'s new row, its values initialised.
  uint32_t NewRow(uint64_t key);
  // Row `slot`'s value (dim floats), followed by its optimizer slots (dim
  // floats each).
  float* RowData(uint32_t slot);
  const float* RowData(uint32_t slot) const;
  int64_t FloatsPerRow() const { return static_cast<int64_t>(options_.dim) * (1 + optimizer_->num_slots()); }

  const EmbeddingTableOptions options_;
  const std::unique_ptr<Optimizer> optimizer_;
  const LearningRateSchedule schedule_;
  const uint64_t digest_;

  absl::flat_hash_map<uint64_t, uint32_t> index_;  // key -> slot
  std::vector<std::unique_ptr<float[]>> blocks_;
  std::vector<RowMeta> meta_;  // per slot
  std::vector<uint32_t> free_slots_;
  uint64_t tick_ = 0;
  int64_t version_ = 0;
  int64_t evicted_rows_ = 0;
  int64_t pulled_rows_ = 0;
  int64_t pushed_rows_ = 0;
};

}  // namespace pstrain
