#include "ps/embedding/embedding_table.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_keys.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<EmbeddingTable>> EmbeddingTable::Create(const EmbeddingTableOptions& options) {
  if (options.dim < 1 || options.dim > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options.name, "': dim ", options.dim, " is outside [1, 4096]"));
  }
  if (options.max_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat("table '", options.name, "': max_rows is negative"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, CreateOptimizer(options.optimizer));
  PSTRAIN_ASSIGN_OR_RETURN(LearningRateSchedule schedule,
                           LearningRateSchedule::Create(options.optimizer, options.total_steps));
  return std::unique_ptr<EmbeddingTable>(new EmbeddingTable(options, std::move(optimizer), std::move(schedule)));
}

EmbeddingTable::EmbeddingTable(const EmbeddingTableOptions& options, std::unique_ptr<Optimizer> optimizer,
                               LearningRateSchedule schedule)
    : options_(options),
      optimizer_(std::move(optimizer)),
      schedule_(std::move(schedule)),
      digest_(EmbeddingTableDigest(options.name)) {}

float* EmbeddingTable::RowData(uint32_t slot) { return const_cast<float*>(std::as_const(*this).RowData(slot)); }

const float* EmbeddingTable::RowData(uint32_t slot) const {
  return blocks_[slot / kBlockRows].get() + (slot % kBlockRows) * FloatsPerRow();
}

uint32_t EmbeddingTable::NewRow(uint64_t key) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(meta_.size());
    meta_.emplace_back();
    if (slot % kBlockRows == 0) blocks_.push_back(std::make_unique<float[]>(kBlockRows * FloatsPerRow()));
  }
  // Counts as changed since any version this table has had so far.
  meta_[slot] = RowMeta{.key = key, .changed_at = version_ + 1};
  float* row = RowData(slot);
  InitialEmbeddingRow(options_.seed, digest_, key, options_.init_scale, absl::MakeSpan(row, options_.dim));
  // The optimizer's slots start at zero (optim/optimizer.h).
  std::fill(row + options_.dim, row + FloatsPerRow(), 0.0f);
  index_.emplace(key, slot);
  return slot;
}

void EmbeddingTable::Evict(int64_t count) {
  std::vector<uint32_t> candidates;
  candidates.reserve(index_.size());
  for (const auto& [key, slot] : index_) {
    if (meta_[slot].last_touch != tick_) candidates.push_back(slot);
  }
  count = std::min<int64_t>(count, static_cast<int64_t>(candidates.size()));
  if (count <= 0) return;
  auto before = [this](uint32_t a, uint32_t b) {
    const RowMeta &x = meta_[a], &y = meta_[b];
    if (options_.eviction == Eviction::kLeastOftenUsed && x.touches != y.touches) return x.touches < y.touches;
    if (x.last_touch != y.last_touch) return x.last_touch < y.last_touch;
    return x.key < y.key;  // deterministic among equals
  };
  std::nth_element(candidates.begin(), candidates.begin() + (count - 1), candidates.end(), before);
  for (int64_t i = 0; i < count; ++i) {
    index_.erase(meta_[candidates[i]].key);
    free_slots_.push_back(candidates[i]);
  }
  evicted_rows_ += count;
}

absl::StatusOr<std::vector<uint32_t>> EmbeddingTable::Touch(absl::Span<const uint64_t> keys) {
  const int64_t limit = options_.max_rows;
  if (limit > 0 && static_cast<int64_t>(keys.size()) > limit) {
    return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': a request of ", keys.size(),
                                                   " rows is more than this shard's max_rows ", limit));
  }
  ++tick_;
  std::vector<uint32_t> slots(keys.size());
  int64_t missing = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = index_.find(keys[i]);
    if (it == index_.end()) {
      ++missing;
      continue;
    }
    slots[i] = it->second;
    meta_[it->second].last_touch = tick_;
    ++meta_[it->second].touches;
  }
  if (missing == 0) return slots;
  if (limit > 0 && rows() + missing > limit) Evict(rows() + missing - limit + std::max<int64_t>(1, limit / 64) - 1);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (auto it = index_.find(keys[i]); it != index_.end()) {
      slots[i] = it->second;  // present before, or a repeat of a key created just now
      continue;
    }
    slots[i] = NewRow(keys[i]);
    meta_[slots[i]].last_touch = tick_;
    meta_[slots[i]].touches = 1;
  }
  return slots;
}

absl::Status EmbeddingTable::Read(absl::Span<const uint64_t> keys, float* out) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<uint32_t> slots, Touch(keys));
  const size_t dim = options_.dim;
  for (size_t i = 0; i < slots.size(); ++i) std::memcpy(out + i * dim, RowData(slots[i]), dim * sizeof(float));
  pulled_rows_ += static_cast<int64_t>(keys.size());
  return absl::OkStatus();
}

absl::Status EmbeddingTable::Apply(absl::Span<const uint64_t> keys, const float* grads, float gradient_scale,
                                   int64_t global_step) {
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<uint32_t> slots, Touch(keys));
  const int64_t dim = options_.dim;
  const int num_slots = optimizer_->num_slots();
  std::vector<float*> slot_ptrs(std::max(1, num_slots));
  OptimizerStep step{.learning_rate = schedule_.At(global_step), .gradient_scale = gradient_scale};
  for (size_t i = 0; i < slots.size(); ++i) {
    float* row = RowData(slots[i]);
    for (int s = 0; s < num_slots; ++s) slot_ptrs[s] = row + (s + 1) * dim;
    step.updates_before = meta_[slots[i]].updates++;
    meta_[slots[i]].changed_at = version_ + 1;
    optimizer_->Apply(row, grads + i * dim, dim, step, slot_ptrs.data(), row);
  }
  pushed_rows_ += static_cast<int64_t>(keys.size());
  ++version_;
  return absl::OkStatus();
}

EmbeddingTable::Rows EmbeddingTable::Export(std::optional<int64_t> changed_after) const {
  Rows rows;
  const int64_t floats = FloatsPerRow();
  if (!changed_after.has_value()) {
    rows.keys.reserve(index_.size());
    rows.updates.reserve(index_.size());
    rows.data.reserve(index_.size() * floats);
  }
  for (const auto& [key, slot] : index_) {
    if (changed_after.has_value() && meta_[slot].changed_at <= *changed_after) continue;
    rows.keys.push_back(key);
    rows.updates.push_back(meta_[slot].updates);
    const float* row = RowData(slot);
    rows.data.insert(rows.data.end(), row, row + floats);
  }
  return rows;
}

std::vector<uint64_t> EmbeddingTable::Keys() const {
  std::vector<uint64_t> keys;
  keys.reserve(index_.size());
  for (const auto& [key, slot] : index_) keys.push_back(key);
  return keys;
}

absl::Status EmbeddingTable::Import(const Rows& rows, int64_t version) {
  PSTRAIN_RETURN_IF_ERROR(CheckImport(rows));
  index_.clear();
  blocks_.clear();
  meta_.clear();
  free_slots_.clear();
  for (size_t i = 0; i < rows.keys.size(); ++i) {
    const uint32_t slot = NewRow(rows.keys[i]);
    std::copy_n(rows.data.data() + i * FloatsPerRow(), FloatsPerRow(), RowData(slot));
    meta_[slot].updates = rows.updates[i];
    meta_[slot].changed_at = 0;  // as the checkpoint holds it
  }
  version_ = version;
  return absl::OkStatus();
}

absl::Status EmbeddingTable::CheckImport(const Rows& rows) const {
  const size_t n = rows.keys.size();
  if (rows.updates.size() != n || rows.data.size() != n * FloatsPerRow()) {
    return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': ", n, " keys, ", rows.updates.size(),
                                                   " update counts and ", rows.data.size(), " floats (", FloatsPerRow(),
                                                   " per row)"));
  }
  if (options_.max_rows > 0 && static_cast<int64_t>(n) > options_.max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", options_.name, "': ", n, " rows, more than max_rows ", options_.max_rows));
  }
  if (absl::flat_hash_set<uint64_t>(rows.keys.begin(), rows.keys.end()).size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("table '", options_.name, "': a key is listed twice"));
  }
  return absl::OkStatus();
}

TableStats EmbeddingTable::Stats() const {
  TableStats stats;
  stats.set_name(options_.name);
  stats.set_rows(rows());
  // The value and slots of every allocated row, the per-row bookkeeping and
  // the index's slots (key, slot, one control byte each).
  const int64_t bytes = static_cast<int64_t>(blocks_.size()) * kBlockRows * FloatsPerRow() * sizeof(float) +
                        static_cast<int64_t>(meta_.capacity() * sizeof(RowMeta)) +
                        static_cast<int64_t>(index_.capacity() * (sizeof(std::pair<uint64_t, uint32_t>) + 1));
  stats.set_bytes(bytes);
  stats.set_bytes_per_row(rows() > 0 ? bytes / rows() : 0);
  stats.set_evicted_rows(evicted_rows_);
  stats.set_pulled_rows(pulled_rows_);
  stats.set_pushed_rows(pushed_rows_);
  stats.set_version(version_);
  return stats;
}

}  // namespace pstrain
