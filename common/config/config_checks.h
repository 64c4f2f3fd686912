// Config checks owned by the modules that own the fields.
//
// ValidateExperimentConfig (config_loader.h) checks what common knows itself
// (cluster hosts, train, timeouts, value ranges) and then runs every check
// registered here. A module whose parts are chosen by name in the config
// registers the check of its fields next to its registry, so the allowed
// values come from the registry and the rules live with the code that
// relies on them:
//   model.name                   models/model.cc (the model zoo)
//   optimizer.*                  optim/optimizer.cc and optim/lr_schedule.cc
//   data.source and its files    common/data/data_source.cc
//   transport                    common/transport/transport.cc
//   consistency, staleness       ps/consistency/consistency_policy.cc
//   variable_update and what     worker/strategy.cc (each strategy's own
//   each strategy reads          rules in worker/strategies/<name>.cc)
// A binary checks the fields of the modules it links: pstrain-ps does not
// link the model zoo or the strategies, so it leaves model.name and
// variable_update to the workers (pstrain-launch checks both roles' views
// before it starts anything).
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/registry.h"
#include "proto/config.pb.h"

namespace pstrain {

// Builds the one error shape of config validation:
//   "<file>: field '<path>': expected <what>, got <found>".
class ConfigChecker {
 public:
  explicit ConfigChecker(absl::string_view filename) : file_(std::string(filename)) {}

  const std::string& file() const { return file_; }

  absl::Status Fail(absl::string_view path, absl::string_view expected, absl::string_view got) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": field '", path, "': expected ", expected, ", got ", got));
  }

  template <typename T>
  absl::Status Positive(absl::string_view path, T v) const {
    if (Finite(v) && v > 0) return absl::OkStatus();
    return Fail(path, "a number > 0", Num(v));
  }

  template <typename T>
  absl::Status NonNegative(absl::string_view path, T v) const {
    if (Finite(v) && v >= 0) return absl::OkStatus();
    return Fail(path, "a number >= 0", Num(v));
  }

  // lo <= v (lo < v when !lo_closed) and v <= hi (v < hi when !hi_closed).
  template <typename T>
  absl::Status InRange(absl::string_view path, T v, T lo, bool lo_closed, T hi, bool hi_closed) const {
    const bool ok = Finite(v) && (lo_closed ? v >= lo : v > lo) && (hi_closed ? v <= hi : v < hi);
    if (ok) return absl::OkStatus();
    return Fail(path,
                absl::StrCat("a number in ", lo_closed ? "[" : "(", Num(lo), ", ", Num(hi), hi_closed ? "]" : ")"),
                Num(v));
  }

  // `value` must be a name `registry` holds; a name it knows but this build
  // lacks is refused with the reason.
  template <typename Entry>
  absl::Status Registered(absl::string_view path, absl::string_view value, const Registry<Entry>& registry) const {
    const std::vector<std::string> names = registry.Names();
    if (std::find(names.begin(), names.end(), value) != names.end()) return absl::OkStatus();
    const std::string reason = registry.UnavailableReason(value);
    return Fail(path, absl::StrCat("one of ", absl::StrJoin(names, ", ")),
                reason.empty() ? absl::StrCat("'", value, "'") : absl::StrCat("'", value, "' (", reason, ")"));
  }

  // `value` must be one of `allowed` (e.g. a registry's Names()).
  absl::Status OneOf(absl::string_view path, absl::string_view value, const std::vector<std::string>& allowed) const {
    if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return absl::OkStatus();
    return Fail(path, absl::StrCat("one of ", absl::StrJoin(allowed, ", ")), absl::StrCat("'", value, "'"));
  }

  template <typename T>
  static std::string Num(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return absl::StrCat(static_cast<double>(v));
    } else {
      return absl::StrCat(v);
    }
  }

 private:
  template <typename T>
  static bool Finite(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      return std::isfinite(v);
    } else {
      return true;
    }
  }

  std::string file_;
};

// Checks the fields one module owns; returns the first problem.
using ConfigCheck = std::function<absl::Status(const ExperimentConfig& config, const ConfigChecker& check)>;

// Registered by the owning module under a short name ("optimizer",
// "variable_update"); run in name order.
Registry<ConfigCheck>& ConfigCheckRegistry();

}  // namespace pstrain
