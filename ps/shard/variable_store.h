// VariableStore: the variables a PS shard holds, the updater that applies the
// optimizer to them, and the generation they belong to.
//
// Generations. A shard's state belongs to the generation the chief chose at
// Init (0 before Init: a started or restarted shard holds nothing). The
// first Init publishes the variables; an Init of a newer generation replaces
// every variable's value, slots, version and consistency state in place,
// with every variable's lock held, so a request holding any variable's lock
// sees either the old generation's state or the new one's. Requests carry
// the generation they were made for, and one of another generation is
// ABORTED (CheckGeneration).
//
// Threads: the set of variables and the updater are set once by Publish and
// immutable after: readable without locks once initialized() is true (each
// variable's data under its own mu). Publish and Replace are serialised by
// the owner (PsShard holds its mu_); the generation is an atomic, written
// by them, readable anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "ps/consistency/consistency_policy.h"
#include "ps/variable/shard_variable.h"

namespace pstrain {

using VariableMap = std::map<std::string, std::unique_ptr<ShardVariable>>;

class VariableStore {
 public:
  // `shard_index` names the shard in errors.
  explicit VariableStore(int shard_index) : shard_index_(shard_index) {}

  // True once Publish has run: the variables and the updater may be used.
  bool initialized() const { return initialized_.load(); }
  // 0 before Init.
  int64_t generation() const { return generation_.load(); }
  // ABORTED, saying why, when a request of generation `theirs` (0: none)
  // is not of this shard's generation (0 before Init: a restarted shard).
  absl::Status CheckGeneration(int64_t theirs) const;

  // Only once initialized():
  const VariableMap& variables() const { return variables_; }
  // The variable called `name`; null when this shard holds none.
  ShardVariable* Find(const std::string& name) const;
  const VariableUpdater& updater() const { return *updater_; }

  // The fewest updates any variable has had (sync: the global steps
  // applied), and the most; 0 before Init.
  int64_t MinVersion() const;
  int64_t NewestVersion() const;
  // The bytes of every variable's value (0 before Init).
  int64_t ValueBytes() const;

  // The first Init: publishes `variables` (values, slots, versions and
  // consistency state filled) and their updater as `generation`. Once.
  void Publish(VariableMap variables, std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule,
               int64_t generation);
  // An Init of the newer `generation` on an initialised shard: replaces
  // every variable's value, slots and version with `fresh`'s, and its
  // consistency state with a new one of `policy`, all at once. The set of
  // variables and their shapes must be the same (INVALID_ARGUMENT naming
  // the first that differs; nothing changes).
  absl::Status Replace(VariableMap fresh, int64_t generation, const ConsistencyPolicy& policy);

 private:
  const int shard_index_;
  std::atomic<bool> initialized_{false};
  std::optional<VariableUpdater> updater_;
  VariableMap variables_;
  std::atomic<int64_t> generation_{0};
};

}  // namespace pstrain
