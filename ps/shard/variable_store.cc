#include "ps/shard/variable_store.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status VariableStore::CheckGeneration(int64_t theirs) const {
  const int64_t mine = generation_.load();
  if (theirs == 0 || theirs == mine) return absl::OkStatus();
  if (mine == 0) {
    return absl::AbortedError(absl::StrCat(
        "PS shard ", shard_index_,
        " has restarted and holds no variables until the chief restores them (request of generation ", theirs, ")"));
  }
  return absl::AbortedError(absl::StrCat("PS shard ", shard_index_, " was restored (generation ", mine,
                                         "); this request is of generation ", theirs));
}

ShardVariable* VariableStore::Find(const std::string& name) const {
  auto it = variables_.find(name);
  return it == variables_.end() ? nullptr : it->second.get();
}

int64_t VariableStore::MinVersion() const {
  if (!initialized_.load()) return 0;
  int64_t least = INT64_MAX;
  for (const auto& [name, var] : variables_) least = std::min(least, var->version.load());
  return least == INT64_MAX ? 0 : least;
}

int64_t VariableStore::NewestVersion() const {
  int64_t newest = 0;
  if (initialized_.load()) {
    for (const auto& [name, var] : variables_) newest = std::max(newest, var->version.load());
  }
  return newest;
}

int64_t VariableStore::ValueBytes() const {
  int64_t bytes = 0;
  if (initialized_.load()) {
    for (const auto& [name, var] : variables_) bytes += var->bytes();
  }
  return bytes;
}

void VariableStore::Publish(VariableMap variables, std::unique_ptr<Optimizer> optimizer, LearningRateSchedule schedule,
                            int64_t generation) {
  variables_ = std::move(variables);
  updater_.emplace(std::move(optimizer), std::move(schedule));
  generation_ = generation;
  initialized_ = true;  // publishes variables_ and updater_
}

absl::Status VariableStore::Replace(VariableMap fresh, int64_t generation, const ConsistencyPolicy& policy) {
  std::vector<ShardVariable*> vars;
  for (auto& [name, var] : variables_) {
    auto it = fresh.find(name);
    if (it == fresh.end() || it->second->shape != var->shape) {
      return absl::InvalidArgumentError(absl::StrCat("init of generation ", generation, ": shard ", shard_index_,
                                                     "'s variable ", name,
                                                     it == fresh.end() ? " is missing" : " has another shape"));
    }
    vars.push_back(var.get());
  }
  if (fresh.size() != variables_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("init of generation ", generation, ": ", fresh.size(),
                                                   " variables for a shard holding ", variables_.size()));
  }
  // Every variable changes at once: a push holding any variable's lock
  // sees either the old generation's state or the new one's.
  VariableLocks locks(vars);
  for (ShardVariable* var : vars) {
    var->mu.AssertHeld();
    ShardVariable& from = *fresh[var->name];
    absl::MutexLock from_lock(&from.mu);
    var->value = std::move(from.value);
    var->spare = nullptr;
    var->slots = std::move(from.slots);
    var->version = from.version.load();
    var->consistency = policy.NewState(*var);
    var->encoded = nullptr;
    var->encoded_version = -1;
  }
  generation_ = generation;
  return absl::OkStatus();
}

}  // namespace pstrain
