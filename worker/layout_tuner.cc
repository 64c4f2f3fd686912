#include "worker/layout_tuner.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/metrics/layout_text.h"

namespace pstrain {
namespace {

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::min(std::max(v, lo), hi); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The median absolute deviation of `v` over its median (0 for a median of 0).
double RelativeSpread(const std::vector<double>& v) {
  const double median = Median(v);
  if (median <= 0) return 0;
  std::vector<double> deviations;
  deviations.reserve(v.size());
  for (double x : v) deviations.push_back(std::abs(x - median));
  return Median(std::move(deviations)) / median;
}

// Keeps the last `n` of `values` after adding `v`.
void KeepLast(std::vector<double>& values, double v, size_t n) {
  values.push_back(v);
  if (values.size() > n) values.erase(values.begin());
}

std::string Describe(const TransferLayout& layout) {
  return LayoutText(layout.batch_bytes, layout.window_bytes, layout.pushes_per_shard);
}

// The knob's value in `layout` (0 batch, 1 window, 2 pushes per shard),
// and its bounds in `o`.
int64_t& Value(TransferLayout& layout, int knob) {
  if (knob == 0) return layout.batch_bytes;
  if (knob == 1) return layout.window_bytes;
  return layout.pushes_per_shard;
}
std::pair<int64_t, int64_t> Bounds(const LayoutTuner::Options& o, int knob) {
  if (knob == 0) return {o.min_batch_bytes, o.max_batch_bytes};
  if (knob == 1) return {o.min_window_bytes, o.max_window_bytes};
  return {o.min_pushes_per_shard, o.max_pushes_per_shard};
}

}  // namespace

LayoutTuner::LayoutTuner(const Options& options) : options_(options) {
  // Window 0 (no limit) starts from the largest window tried.
  const int64_t window = options.start.window_bytes > 0 ? options.start.window_bytes : options.max_window_bytes;
  current_.batch_bytes = Clamp(options.start.batch_bytes, options.min_batch_bytes, options.max_batch_bytes);
  current_.window_bytes = Clamp(window, options.min_window_bytes, options.max_window_bytes);
  // pushes_per_shard 0 (no limit) starts from the most tried.
  const int64_t per_shard =
      options.start.pushes_per_shard > 0 ? options.start.pushes_per_shard : options.max_pushes_per_shard;
  current_.pushes_per_shard = Clamp(per_shard, options.min_pushes_per_shard, options.max_pushes_per_shard);
  best_ = current_;
  skip_ = options.settle_steps;
}

std::optional<TransferLayout> LayoutTuner::Observe(int64_t step, double seconds, double cpu_seconds) {
  if (skip_ > 0 || skip_seconds_ > 0) {
    skip_ = std::max(0, skip_ - 1);
    skip_seconds_ -= seconds;
    return std::nullopt;
  }
  const std::optional<Cost> cost = TrialCost(seconds, cpu_seconds);
  if (!cost) return std::nullopt;
  switch (state_) {
    case State::kMeasureBase: {
      StartSearch(*cost, /*retune=*/false);
      std::optional<TransferLayout> next = NextCandidate();
      if (!next) {
        state_ = State::kSettled;
        settled_step_ = step + 1;
        return std::nullopt;
      }
      return Change(step + 1, *next, cost->seconds, "try " + Describe(*next));
    }
    case State::kTrial:
      return OnTrialDone(step, *cost);
    case State::kControl:
      return OnControlDone(step, *cost);
    case State::kSettled:
      return WatchSettled(step, *cost);
  }
  return std::nullopt;
}

std::optional<LayoutTuner::Cost> LayoutTuner::TrialCost(double seconds, double cpu_seconds) {
  samples_.push_back(seconds);
  cpu_samples_.push_back(cpu_seconds);
  if (static_cast<int>(samples_.size()) < TrialSteps()) return std::nullopt;
  Cost cost;
  cost.seconds = Median(samples_);
  const bool cpu_known = std::all_of(cpu_samples_.begin(), cpu_samples_.end(), [](double c) { return c >= 0; });
  cost.cpu = cpu_known ? Median(cpu_samples_) : -1;
  KeepLast(spreads_, RelativeSpread(samples_), kSpreadTrials);
  KeepLast(cpu_spreads_, cpu_known ? RelativeSpread(cpu_samples_) : 0, kSpreadTrials);
  samples_.clear();
  cpu_samples_.clear();
  return cost;
}

bool LayoutTuner::AsFastAndCheaper(const Cost& cost) const {
  if (cost.cpu < 0 || best_cpu_ <= 0) return false;
  return cost.seconds <= best_seconds_ * (1 + options_.tie) &&
         cost.cpu <= best_cpu_ * (1 - Margin(options_.min_cpu_gain, cpu_spreads_));
}

int LayoutTuner::TrialSteps() const {
  const bool noisy = !spreads_.empty() && Median(spreads_) > options_.noisy_spread;
  if (!noisy) return options_.steps_per_trial;
  int steps = std::max(options_.steps_per_trial, options_.noisy_steps_per_trial);
  if (options_.max_trial_seconds > 0 && best_seconds_ > 0) {
    const double fit = std::floor(options_.max_trial_seconds / best_seconds_);
    steps = static_cast<int>(std::clamp<double>(fit, options_.steps_per_trial, steps));
  }
  return steps;
}

double LayoutTuner::Margin(double threshold, const std::vector<double>& spreads) const {
  if (spreads.empty()) return threshold;
  // The median of n samples has a standard error of about 1.25 standard
  // deviations over sqrt(n); a deviation is about 1.48 median absolute
  // deviations; a difference of two such medians is sqrt(2) of one.
  const double standard_error = 1.25 * 1.4826 * Median(spreads) * std::sqrt(2.0 / TrialSteps());
  return std::max(threshold, options_.noise_widths * standard_error);
}

void LayoutTuner::StartSearch(const Cost& base_cost, bool retune) {
  retuning_ = retune;
  settled_costs_.clear();
  best_ = current_;
  best_seconds_ = base_cost.seconds;
  best_cpu_ = base_cost.cpu;
  state_ = State::kTrial;
  factor_ = 4;
  knob_ = kBatch;
  direction_ = +1;
  knobs_tried_ = 0;
  moved_in_round_ = false;
  moved_this_direction_ = false;
}

TransferLayout LayoutTuner::Moved(const TransferLayout& from, int knob, int direction) const {
  TransferLayout to = from;
  int64_t& v = Value(to, knob);
  const auto [lo, hi] = Bounds(options_, knob);
  v = Clamp(direction > 0 ? v * factor_ : v / factor_, lo, hi);
  return to;
}

void LayoutTuner::AdvanceDirection() {
  if (direction_ > 0 && !moved_this_direction_) {
    direction_ = -1;
  } else {
    direction_ = +1;
    knob_ = (knob_ + 1) % kNumKnobs;
    ++knobs_tried_;
  }
  moved_this_direction_ = false;
}

std::optional<TransferLayout> LayoutTuner::NextCandidate() {
  while (true) {
    while (knobs_tried_ < kNumKnobs) {
      const TransferLayout candidate = Moved(best_, knob_, direction_);
      if (!(candidate == best_)) return candidate;
      AdvanceDirection();  // at a bound
    }
    // The round is over. A re-tune settles after its one round in steps
    // of 4. A first search, after a round that made no step faster, goes
    // on in steps of 2, and after such a round in steps of 2 settles.
    if (retuning_) return std::nullopt;
    if (!moved_in_round_) {
      if (factor_ == 2) return std::nullopt;
      factor_ = 2;
    }
    knobs_tried_ = 0;
    moved_in_round_ = false;
    knob_ = kBatch;
    direction_ = +1;
    moved_this_direction_ = false;
  }
}

std::optional<TransferLayout> LayoutTuner::OnTrialDone(int64_t step, const Cost& cost) {
  if (cost.seconds > best_seconds_ * (1 + Margin(options_.drift, spreads_))) {
    // Far slower: this setting, or the link under every setting? Measure
    // the best one again before judging.
    state_ = State::kControl;
    return Change(step + 1, best_, cost.seconds,
                  absl::StrFormat("control: %s again (the trial took %.4g s a step against %.4g s)", Describe(best_),
                                  cost.seconds, best_seconds_));
  }
  std::string note;
  const bool faster = cost.seconds < best_seconds_ * (1 - Margin(options_.min_gain, spreads_));
  if (!faster && AsFastAndCheaper(cost)) {
    note = absl::StrFormat(" (%s kept: as fast, %.0f%% less CPU a step)", Describe(current_),
                           100 * (1 - cost.cpu / best_cpu_));
  }
  if (faster || !note.empty()) {
    best_ = current_;
    best_seconds_ = cost.seconds;
    best_cpu_ = cost.cpu;
    moved_in_round_ = moved_in_round_ || faster;
    moved_this_direction_ = true;
  } else {
    AdvanceDirection();
  }
  return NextOrSettle(step, cost.seconds, note);
}

std::optional<TransferLayout> LayoutTuner::OnControlDone(int64_t step, const Cost& cost) {
  state_ = State::kTrial;
  const bool pace_changed = std::abs(cost.seconds / best_seconds_ - 1) > Margin(options_.drift, spreads_);
  if (pace_changed && !retuning_) {
    // The best setting changed pace too: the link (or the CPU) did. What
    // was measured before no longer holds; search again from here.
    const double was = best_seconds_;
    StartSearch(cost, /*retune=*/true);
    std::optional<TransferLayout> next = NextCandidate();
    if (!next) return NextOrSettle(step, cost.seconds);
    return Change(step + 1, *next, cost.seconds,
                  absl::StrFormat("re-base: %s now takes %.4g s a step (was %.4g s); try %s", Describe(best_),
                                  cost.seconds, was, Describe(*next)));
  }
  std::string note;
  if (pace_changed) {
    // A re-tune measured its base at the new pace already: the link still
    // moving, or its first figures' noise. Its one round goes on from the
    // pace measured now, so that it still settles within a round.
    note = absl::StrFormat(" (re-based: %s now takes %.4g s a step, was %.4g s)", Describe(best_), cost.seconds,
                           best_seconds_);
    best_seconds_ = cost.seconds;
    best_cpu_ = cost.cpu;
  }
  AdvanceDirection();  // the trial's setting was slower than the best, as measured now
  return NextOrSettle(step, cost.seconds, note);
}

std::optional<TransferLayout> LayoutTuner::NextOrSettle(int64_t step, double previous, const std::string& note) {
  std::optional<TransferLayout> next = NextCandidate();
  if (next) return Change(step + 1, *next, previous, "try " + Describe(*next) + note);
  state_ = State::kSettled;
  settled_step_ = step + 1;
  drifted_trials_ = 0;
  const std::string why = absl::StrFormat("settled on %s (%.4g s a step)", Describe(best_), best_seconds_) + note;
  if (current_ == best_) {
    decisions_.push_back({step + 1, best_, previous, why});
    return std::nullopt;
  }
  return Change(step + 1, best_, previous, why);
}

std::optional<TransferLayout> LayoutTuner::WatchSettled(int64_t step, const Cost& cost) {
  if (std::abs(cost.seconds / best_seconds_ - 1) <= Margin(options_.drift, spreads_)) {
    drifted_trials_ = 0;
    if (settled_costs_.empty()) settled_costs_.push_back(best_seconds_);
    KeepLast(settled_costs_, cost.seconds, kSettledCosts);
    best_seconds_ = Median(settled_costs_);
    return std::nullopt;
  }
  if (++drifted_trials_ < 2) return std::nullopt;
  const double settled = best_seconds_;
  StartSearch(cost, /*retune=*/true);
  std::optional<TransferLayout> next = NextCandidate();
  const std::string why = absl::StrFormat("re-tune: %.4g s a step against %.4g s when settled; try %s", cost.seconds,
                                          settled, next ? Describe(*next) : "nothing");
  if (!next) {
    state_ = State::kSettled;
    settled_step_ = step + 1;
    return std::nullopt;
  }
  settled_step_ = -1;
  return Change(step + 1, *next, cost.seconds, why);
}

std::optional<TransferLayout> LayoutTuner::Change(int64_t step, const TransferLayout& to, double previous,
                                                  std::string why) {
  current_ = to;
  decisions_.push_back({step, to, previous, std::move(why)});
  skip_ = options_.settle_steps;
  skip_seconds_ = options_.settle_seconds;
  samples_.clear();
  cpu_samples_.clear();
  return to;
}

}  // namespace pstrain
