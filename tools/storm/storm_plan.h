// A fault storm's schedule (docs/ELASTIC.md, "Fault storms"): a seeded
// sequence of faults, one every `every` on average from `start`, each on a
// role chosen by the seed. The same options and seed give the same storm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pstrain::storm {

enum class FaultKind {
  kKillWorker,   // SIGKILL of a worker (the launcher starts it again: it rejoins)
  kPauseWorker,  // SIGSTOP of a worker for `pause`, then SIGCONT
  kKillPs,       // SIGKILL of a PS shard (the launcher starts it again: the PS recovery)
};

// "kill_worker", "pause_worker", "kill_ps".
std::string FaultName(FaultKind kind);
absl::StatusOr<FaultKind> ParseFault(const std::string& name);

struct Fault {
  absl::Duration at;  // after the storm's start
  FaultKind kind = FaultKind::kKillWorker;
  int target = 0;  // the worker's or shard's index
  absl::Duration pause;
};

struct StormOptions {
  uint64_t seed = 1;
  int events = 30;
  absl::Duration start = absl::Seconds(20);  // the first fault's earliest time
  absl::Duration every = absl::Seconds(20);  // mean spacing; each fault lands in its own slot of this length
  std::vector<FaultKind> kinds = {FaultKind::kKillWorker, FaultKind::kPauseWorker};
  int workers = 2;
  int ps = 0;
  // Roles never faulted: the chief (worker 0) hosts the elastic all-reduce's
  // store; PS shard 0 holds the data ledger.
  int first_worker = 1;
  int first_ps = 1;
  absl::Duration min_pause = absl::Seconds(2);
  absl::Duration max_pause = absl::Seconds(6);
};

// The storm: `events` faults in time order, fault i at a seeded moment of
// [start + i x every, start + (i + 0.5) x every) (so recoveries of up to half
// the spacing do not overlap). INVALID_ARGUMENT naming the option when no
// role can take a kind of fault, the counts are not positive, or the pause
// range is empty.
absl::StatusOr<std::vector<Fault>> PlanStorm(const StormOptions& options);

}  // namespace pstrain::storm
