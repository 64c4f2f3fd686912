// LayoutTuner: tunes the pipeline's transfer layout online from measured
// step times, as ByteScheduler and AutoByte do (config ps_scheduling.tune;
// docs/STRATEGIES.md, "The layout tunes itself"). Three knobs, all a
// worker's own (the shards do not see them): the bytes one push or pull RPC
// carries (ps_scheduling.batch_bytes: whole variable parts of one shard, the
// unit the pipeline schedules), the push bytes in flight
// (ps_scheduling.window_bytes) and the pushes in flight to one shard
// (ps_scheduling.pushes_per_shard).
//
// The search, on powers of two within the bounds:
//   - a trial measures a setting: `settle_steps` steps after a change are
//     not counted, then the median of `steps_per_trial` step times is its
//     cost;
//   - from the best setting so far, one knob at a time, multiply it by the
//     factor (4 at first); while that is at least `min_gain` faster keep
//     going, else try dividing the same way; then the other knob (a
//     saturating gain, as a window's, shows in steps of 4 where one of 2
//     may hide in the noise);
//   - a round over the knobs that makes no step faster goes on in steps of
//     2, and a round in steps of 2 that makes none faster settles the
//     search. A re-tune (below) makes one round in steps of 4 (each knob
//     on in the direction that gains, as far as it gains) and settles:
//     after a link change the coarse moves are what pays, and more rounds
//     would take it past a minute to settle again on the seed cluster;
//   - a move that is no faster but not slower either (within `tie`) is
//     still taken when its steps cost this process at least `min_cpu_gain`
//     less CPU (fewer, larger RPCs for the same step time): where the links
//     are not the limit, settings differ in CPU, not in step time, and the
//     cheapest of equals leaves the CPU to the rest of the job. Such a move
//     goes on in its direction but starts no further round: CPU seconds
//     jitter from trial to trial by more than their spread within one shows
//     (other processes share the cores), and rounds renewed by that jitter
//     kept the search of the seed cluster going for 135 steps;
//   - settled, each run of `steps_per_trial` steps is compared with the
//     settled cost: two in a row off by more than `drift` (the link or the
//     load changed) start a re-tune from the current setting; each run
//     within it refines the settled cost (the median of the last
//     kSettledCosts such runs: one trial's figure may be off by its noise);
//   - a trial far slower than the best (`drift`) is followed by a control
//     trial of the best: when that one changed pace too, a first search
//     starts over from it as a re-tune (figures from before the change do
//     not hold), and a re-tune goes on with its round from the new figure;
//   - the thresholds above (`min_gain`, `drift`; `min_cpu_gain` for CPU
//     seconds; not `tie`, which stays strict) widen to `noise_widths`
//     standard errors of the difference of two trials' medians where that
//     is larger, from the step times' spread: the median, over the last
//     kSpreadTrials trials, of each trial's median absolute deviation over
//     its median (CPU seconds alike). Where the spread is over
//     `noisy_spread` a trial counts `noisy_steps_per_trial` steps, or as
//     many as fit in `max_trial_seconds` (when set) of the best setting's
//     steps, at least `steps_per_trial`: long steps (a slow link) are
//     already averages over many transfers, and 16 of them made one trial
//     of the seed cluster at 2 Gbit/s last 13 s of its time. On a
//     quiet, link-bound cluster the spread is a percent or less and nothing
//     changes; where the CPU is the limit and steps jitter by a third, a 3%
//     "gain" is noise, and taking it kept the search wandering, and the
//     settled watch re-tuning, for a whole run;
//   - after a change, `settle_steps` steps and at least `settle_seconds` of
//     steps go uncounted: followers adopt the chief's layout through their
//     heartbeats (PipelineTuning), and a trial timed before they did would
//     time a mixture.
// Pure logic: no clock, no I/O; the caller feeds step times and applies
// the settings it returns. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pstrain {

struct TransferLayout {
  int64_t batch_bytes = 0;
  int64_t window_bytes = 0;
  int64_t pushes_per_shard = 1;
  bool operator==(const TransferLayout& o) const {
    return batch_bytes == o.batch_bytes && window_bytes == o.window_bytes && pushes_per_shard == o.pushes_per_shard;
  }
};

// One change of setting: from the step it applies, what it is, the cost
// (median seconds per step) measured for the setting it replaces, and why.
struct TuningDecision {
  int64_t step = 0;
  TransferLayout layout;
  double previous_seconds = 0;
  std::string why;
};

class LayoutTuner {
 public:
  struct Options {
    TransferLayout start;
    int64_t min_batch_bytes = int64_t{64} << 10;
    int64_t max_batch_bytes = int64_t{64} << 20;
    int64_t min_window_bytes = int64_t{1} << 20;
    int64_t max_window_bytes = int64_t{1} << 30;
    int64_t min_pushes_per_shard = 1;
    int64_t max_pushes_per_shard = 8;
    int settle_steps = 1;
    int steps_per_trial = 4;
    double min_gain = 0.03;
    double tie = 0.01;
    double min_cpu_gain = 0.10;
    double drift = 0.15;
    double noise_widths = 3.0;
    double noisy_spread = 0.05;
    int noisy_steps_per_trial = 16;
    double max_trial_seconds = 0;  // 0: no bound (in the seconds Observe gets)
    double settle_seconds = 0;
  };
  // The trials whose spreads make the noise estimate.
  static constexpr int kSpreadTrials = 8;
  // Settled, the cost watched against is the median of this many runs.
  static constexpr int kSettledCosts = 5;
  explicit LayoutTuner(const Options& options);

  // The step time of `step` (run with current()) and the CPU seconds this
  // process spent in it (negative: not known; then only step times count).
  // Returns the setting to use from the next step on when it changes,
  // nullopt otherwise.
  std::optional<TransferLayout> Observe(int64_t step, double seconds, double cpu_seconds = -1);

  const TransferLayout& current() const { return current_; }
  // The search has settled (and not restarted since): at settled_step.
  bool settled() const { return state_ == State::kSettled; }
  int64_t settled_step() const { return settled_step_; }
  // The cost of the best setting found by the last search.
  double settled_seconds() const { return best_seconds_; }
  const std::vector<TuningDecision>& decisions() const { return decisions_; }

 private:
  // kControl: the best setting measured again after a trial far slower
  // than it, to tell a bad setting from a link (or CPU) that changed.
  enum class State { kMeasureBase, kTrial, kControl, kSettled };
  enum Knob { kBatch = 0, kWindow = 1, kPushesPerShard = 2, kNumKnobs = 3 };
  // A trial's medians: seconds a step, and CPU seconds a step (negative
  // when a step's was not known).
  struct Cost {
    double seconds = 0;
    double cpu = -1;
  };
  // The current trial's cost, once it has counted enough steps.
  std::optional<Cost> TrialCost(double seconds, double cpu_seconds);
  // The trial of current_ took no longer than best_ (within options_.tie)
  // and at least CpuMargin(min_cpu_gain) less CPU.
  bool AsFastAndCheaper(const Cost& cost) const;
  // The steps a trial counts now: more where steps spread widely.
  int TrialSteps() const;
  // `threshold`, or options_.noise_widths standard errors of the
  // difference of two trials' medians, from `spreads`, when that is larger.
  double Margin(double threshold, const std::vector<double>& spreads) const;
  // The next setting to try from the best one (knob_, direction_), moving
  // to the next direction or knob when one leaves the bounds; nullopt when
  // the round is over.
  std::optional<TransferLayout> NextCandidate();
  TransferLayout Moved(const TransferLayout& from, int knob, int direction) const;
  // The current direction is done (it failed, or reached a bound): halving
  // is tried only when doubling never helped (it came from below
  // otherwise); after halving, the other knob.
  void AdvanceDirection();
  std::optional<TransferLayout> Change(int64_t step, const TransferLayout& to, double previous, std::string why);
  std::optional<TransferLayout> OnTrialDone(int64_t step, const Cost& cost);
  std::optional<TransferLayout> OnControlDone(int64_t step, const Cost& cost);
  // The search goes on from best_: the next candidate (its decision's text
  // ends with `note`), or settled on best_.
  std::optional<TransferLayout> NextOrSettle(int64_t step, double previous, const std::string& note = "");
  std::optional<TransferLayout> WatchSettled(int64_t step, const Cost& cost);
  // `retune`: the search is a re-tune (WatchSettled, a re-base), not the first.
  void StartSearch(const Cost& base_cost, bool retune);

  const Options options_;
  TransferLayout current_;
  TransferLayout best_;
  double best_seconds_ = 0;
  double best_cpu_ = -1;  // CPU seconds a step of best_; negative: not known
  State state_ = State::kMeasureBase;
  int knob_ = kBatch;
  int factor_ = 4;               // the step: 4, then 2
  int direction_ = +1;           // +1 multiplies by factor_, -1 divides
  bool moved_in_round_ = false;  // a step got faster in this round
  bool retuning_ = false;        // this search began from a settled or measured setting whose pace changed
  bool moved_this_direction_ = false;
  int knobs_tried_ = 0;              // knobs finished in this round
  int skip_ = 0;                     // settle steps still to skip
  double skip_seconds_ = 0;          // settle seconds still to skip
  std::vector<double> spreads_;      // the last kSpreadTrials trials' spreads
  std::vector<double> cpu_spreads_;  // and of their CPU seconds
  std::vector<double> samples_;
  std::vector<double> cpu_samples_;
  int drifted_trials_ = 0;
  int64_t settled_step_ = -1;
  std::vector<double> settled_costs_;  // settled: the last kSettledCosts runs within the margin
  std::vector<TuningDecision> decisions_;
};

}  // namespace pstrain
