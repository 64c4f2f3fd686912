#include "tools/storm/storm_plan.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace pstrain::storm {

std::string FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKillWorker:
      return "kill_worker";
    case FaultKind::kPauseWorker:
      return "pause_worker";
    case FaultKind::kKillPs:
      return "kill_ps";
  }
  return "?";
}

absl::StatusOr<FaultKind> ParseFault(const std::string& name) {
  for (FaultKind kind : {FaultKind::kKillWorker, FaultKind::kPauseWorker, FaultKind::kKillPs}) {
    if (FaultName(kind) == name) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown fault '", name, "' (expected kill_worker, pause_worker or kill_ps)"));
}

absl::StatusOr<std::vector<Fault>> PlanStorm(const StormOptions& o) {
  auto invalid = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("storm: ", what)); };
  if (o.events < 1) return invalid(absl::StrCat("--events must be >= 1, got ", o.events));
  if (o.every <= absl::ZeroDuration()) return invalid("--every_s must be > 0");
  if (o.kinds.empty()) return invalid("--faults names no fault");
  if (o.min_pause <= absl::ZeroDuration() || o.max_pause < o.min_pause) {
    return invalid("the pause range is empty (--min_pause_s, --max_pause_s)");
  }
  for (FaultKind kind : o.kinds) {
    const bool on_ps = kind == FaultKind::kKillPs;
    if ((on_ps ? o.ps - o.first_ps : o.workers - o.first_worker) < 1) {
      return invalid(absl::StrCat(FaultName(kind), ": no ", on_ps ? "PS shard" : "worker",
                                  " to fault (the chief and PS shard 0 are never faulted)"));
    }
  }
  std::mt19937_64 random(o.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto pick = [&](int first, int end) {
    return first + static_cast<int>(unit(random) * (end - first)) % (end - first);
  };
  std::vector<Fault> faults;
  for (int i = 0; i < o.events; ++i) {
    Fault f;
    f.at = o.start + o.every * i + o.every * (0.5 * unit(random));
    f.kind = o.kinds[pick(0, static_cast<int>(o.kinds.size()))];
    f.target = f.kind == FaultKind::kKillPs ? pick(o.first_ps, o.ps) : pick(o.first_worker, o.workers);
    f.pause = o.min_pause + (o.max_pause - o.min_pause) * unit(random);
    faults.push_back(f);
  }
  return faults;
}

}  // namespace pstrain::storm
