// StragglerLines: the chief's lines about workers slower than their peers.
// After each step it reads the stragglers PS shard 0 names now
// (ShardSession::stragglers, from the busy time each worker's pushes report;
// ps/shard/straggler_watch.h) and prints a line when one is named or keeps
// pace again:
//   straggler: worker 2 is 1.52x slower than the others (its busy time per step, waits excluded; named at its step 140)
//   straggler: worker 2 keeps pace again (step 300)
// A step observer (worker/run/observers/step_observer.h); the run's record
// and its cost are result.json's `stragglers` (StragglerSummary).
#pragma once

#include <cstdint>
#include <map>
#include <ostream>

#include "worker/run/observers/step_observer.h"
#include "worker/strategy.h"

namespace pstrain {

class StragglerLines : public StepObserver {
 public:
  // `shards` must outlive the observer.
  StragglerLines(const ShardSession* shards, std::ostream& out) : shards_(shards), out_(out) {}
  void OnStepEnd(const StepOutcome& outcome) override;

 private:
  const ShardSession* const shards_;
  std::ostream& out_;
  std::map<int, Straggler> named_;  // by worker: the ones named now
};

}  // namespace pstrain
