// Registry<Entry>: the pluggable parts of one kind (layers, models,
// optimizers, strategies, transports, ...) by name.
//
// Every part registers itself from its own file with a static initialiser,
//   const bool kRegistered = OptimizerRegistry(DeviceKind::kCpu).Register("sgd", ...);
// so adding one touches one file. Contracts:
//   * A name registered twice is a build mistake (two files claim one name):
//     the process stops at start-up with a message naming the kind and the
//     name, before it can run with either.
//   * Find() of an unknown name is NotFound listing the known names, so a
//     typo in a config reads "unknown optimizer 'momentun'; known: momentum, sgd".
//   * Names() is sorted; config validation takes its allowed values from it.
//   * A part that exists but is not built here (a library missing at build
//     time) can register its name with the reason instead, so a config naming
//     it is refused with that reason rather than as a typo.
//   * Thread-safe. Entries are returned by copy (they are small: factories
//     and descriptions), so no lock is held while one runs.
// Each registry is one function-local static of the module that owns the
// kind (never destroyed, so static initialisers of any order may use it).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"

namespace pstrain {

template <typename Entry>
class Registry {
 public:
  // `kind` names what is registered, in messages: "optimizer", "layer type for cpu".
  explicit Registry(std::string kind) : kind_(std::move(kind)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds `entry` under `name`; CHECK-fails when `name` is taken. Returns
  // true, so that a registration can initialise a static.
  bool Register(const std::string& name, Entry entry) {
    absl::MutexLock lock(&mu_);
    const bool inserted = entries_.emplace(name, std::move(entry)).second;
    CHECK(inserted && unavailable_.find(name) == unavailable_.end())
        << kind_ << " '" << name << "' is registered twice (two files claim the name)";
    return true;
  }

  // Records that `name` exists but is not part of this build, and why (e.g.
  // "this pstrain was built without UCX: install libucx-dev and configure
  // with -DPSTRAIN_WITH_UCX=ON"). Find() then says so; Names() leaves it out.
  bool RegisterUnavailable(const std::string& name, std::string reason) {
    absl::MutexLock lock(&mu_);
    CHECK(entries_.find(name) == entries_.end() && unavailable_.emplace(name, std::move(reason)).second)
        << kind_ << " '" << name << "' is registered twice (two files claim the name)";
    return true;
  }

  // The entry of `name`; FailedPrecondition with the reason for a name this
  // build lacks; NotFound naming the known ones otherwise.
  absl::StatusOr<Entry> Find(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(name);
    if (it != entries_.end()) return it->second;
    if (auto missing = unavailable_.find(name); missing != unavailable_.end()) {
      return absl::FailedPreconditionError(absl::StrCat(kind_, " '", name, "' is not available: ", missing->second));
    }
    return absl::NotFoundError(UnknownMessageLocked(name));
  }

  // Why `name` is not in this build; empty when it is, or is unknown.
  std::string UnavailableReason(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = unavailable_.find(name);
    return it == unavailable_.end() ? std::string() : it->second;
  }

  bool Contains(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    return entries_.find(name) != entries_.end();
  }

  // Every registered name, sorted.
  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

  const std::string& kind() const { return kind_; }

 private:
  std::string UnknownMessageLocked(absl::string_view name) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<absl::string_view> names;
    for (const auto& [known, entry] : entries_) names.push_back(known);
    return absl::StrCat(
        "unknown ", kind_, " '", name,
        "'; known: ", names.empty() ? "none (is the library that provides them linked?)" : absl::StrJoin(names, ", "));
  }

  const std::string kind_;
  mutable absl::Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> unavailable_ ABSL_GUARDED_BY(mu_);  // name -> reason
};

}  // namespace pstrain
