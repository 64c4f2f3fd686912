// StragglerWatch: which workers are slower than their peers, from the busy
// time of each step they report with their pushes (PushRequest.busy_seconds:
// the step's wall time less what it waited for others). Under sync every
// worker steps at the pace of the slowest, so step times cannot tell; busy
// times can: the fast ones spend the difference waiting.
//
// Each step a worker reports is set beside its peers' pace then (the
// median, over the other workers that have not left, of each one's median
// busy time over its last kPeerWindow (5) steps). The window is short on
// purpose: what slows a whole host (its scheduler, a layout every worker
// tries, ps_scheduling.tune) slows every worker in the same steps, and a
// longer window (20) lagged behind it, so every worker looked slow for a few
// steps after such an episode (over a clean 10-minute run on two cores that
// named a worker). A peer that has not reported while the workers made
// kStaleRounds (4) steps each (dead but not yet declared lost, or paused)
// does not count until it does. A worker's ratio over some steps is its
// busy seconds in them over its peers' pace in them, summed (a mean of
// per-step ratios would overweight the steps where the peers were quick).
// A worker is named a straggler by either of two rules:
//  - slowed throughout: its ratio over its last kThroughoutWindow (15)
//    steps is kThroughoutRatio (1.5) or more, and over each third of them
//    (5 steps) kThroughoutBlockRatio (1.3) or more, for kThroughoutPersist
//    (4) steps in a row. Thirds, not single steps: a worker paused a third
//    of the time has steps at pace whenever a pause falls in its waits
//    (which are not busy time), the more the closer its step is to the
//    pause's period, yet each third of its steps stays over 1.3x. A worker
//    paused a third of the time (slowed to 1/1.5 of its speed) is named
//    within 20 of its steps (docs/ELASTIC.md, "Stragglers");
//  - slowed in bursts, or by less (a coarse CPU quota, long pauses,
//    1.3-1.5x throughout): its ratio over its last kMeanWindow (100) steps
//    at kNameRatio (1.3) or more (within about 70 steps for every other
//    step twice as long).
// What a clean run has meets neither: the scheduler of a busy host delaying
// one worker for a second or so (up to 1.44x its peers over 25 steps, a few
// of every ten steps at pace), or every worker slowing down at once (the
// short peer window follows it). A straggler stops being one after
// kClearPersist (8) steps in a row whose ratio over the last kRecentWindow
// is below kClearRatio (1.15); the mean rule then counts from its steps at
// pace only. While named, its busy time beyond its peers' pace adds up
// (Straggler.excess_seconds: under sync, about how long the others waited
// for it); Straggler.ratio is its ratio over its last kRecentWindow steps.
//
// Not thread-safe: PsShard holds it (in ShardMembership) under its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "proto/ps.pb.h"

namespace pstrain {

class StragglerWatch {
 public:
  static constexpr int kPeerWindow = 5;
  static constexpr int kRecentWindow = 10;
  static constexpr int kThroughoutWindow = 15;
  static constexpr int kThroughoutBlocks = 3;
  static constexpr int kThroughoutPersist = 4;
  static constexpr double kThroughoutBlockRatio = 1.3;
  static constexpr double kThroughoutRatio = 1.5;
  static constexpr int kMeanWindow = 100;
  static constexpr int kClearPersist = 8;
  static constexpr int kStaleRounds = 4;
  static constexpr double kNameRatio = 1.3;
  static constexpr double kClearRatio = 1.15;
  static_assert(kThroughoutWindow % kThroughoutBlocks == 0, "the window splits into whole blocks");

  explicit StragglerWatch(int num_workers) : workers_(num_workers) {}

  // `worker` reports `seconds` busy in the step before its local step
  // `local_step` (every push of a step carries it: only the first counts).
  // True when the current stragglers changed.
  bool Observe(int worker, int64_t local_step, double seconds);
  // `worker` left the run (lost, or restarted as a new process): its pace no
  // longer counts, and it is no straggler now.
  void Forget(int worker);
  // `worker` finished its part: its pace no longer counts; named, it stays a
  // straggler (slow to the end).
  void Finished(int worker);

  // The stragglers now, by worker.
  std::vector<Straggler> Current() const;
  // Every worker ever named, in the order named (`current` says which still are).
  const std::vector<Straggler>& named() const { return named_; }

 private:
  // One step: the worker's busy seconds and its peers' pace then.
  struct StepPace {
    double busy = 0;
    double peers = 0;
  };
  struct Pace {
    std::deque<double> busy;     // the last kPeerWindow busy times
    double typical = 0;          // their median, once there are kPeerWindow
    std::deque<StepPace> steps;  // the last kMeanWindow steps compared
    int64_t last_step = -1;
    int64_t last_report = -1;  // reports_ at its last report
    int throughout = 0;        // steps in a row meeting the slowed-throughout rule
    int below = 0;             // named: steps in a row below kClearRatio
    int named = -1;            // index in named_ while it is a straggler
  };
  // Records `seconds` in the worker's own window and its typical step.
  static void Remember(Pace& p, double seconds);
  // The median of the typical steps of the workers other than `worker` that
  // have a full window and reported lately (kStaleRounds); 0 when none has.
  double PeersTypical(int worker) const;
  // Whether `p`, not named, now meets a rule to be named.
  static bool MeetsANamingRule(Pace& p);
  // The slowed-throughout condition on the last kThroughoutWindow steps of `p`.
  static bool SlowedThroughout(const Pace& p);
  // The ratio over the last kRecentWindow steps of `p`.
  static double RecentRatio(const Pace& p);

  std::vector<Pace> workers_;
  std::vector<Straggler> named_;
  int64_t reports_ = 0;  // steps reported by all workers so far
};

}  // namespace pstrain
