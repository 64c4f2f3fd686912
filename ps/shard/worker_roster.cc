#include "ps/shard/worker_roster.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {

WorkerRoster::WorkerRoster(int num_workers, absl::Time start, bool start_absent)
    : departed_(std::make_unique<std::atomic<bool>[]>(num_workers)),
      last_seen_(num_workers, start),
      last_step_(num_workers, -1),
      seen_(num_workers, false),
      absent_(num_workers, start_absent),
      finished_pushing_(num_workers, false),
      incarnation_(num_workers, 0),
      rejoined_(num_workers, false),
      rejoin_versions_(num_workers, 0) {
  progress_.completed_steps.assign(num_workers, 0);
  progress_.done.assign(num_workers, false);
  progress_.lost.assign(num_workers, false);
  progress_.paused.assign(num_workers, false);
  for (int w = 0; w < num_workers; ++w) departed_[w] = start_absent;
}

bool WorkerRoster::Arrive(int worker, absl::Time now) {
  // Only an absent worker changes: the others' liveness is their heartbeats'.
  if (!absent_[worker]) return false;
  seen_[worker] = true;
  absent_[worker] = false;
  departed_[worker] = false;
  progress_.completed_steps[worker] = std::max<int64_t>(SlowestOtherThan(worker), 0);
  last_seen_[worker] = now;
  return true;
}

int64_t WorkerRoster::SlowestOtherThan(int worker) const {
  int64_t slowest = -1;
  for (int w : Present()) {
    if (w == worker || progress_.paused[w]) continue;
    slowest = slowest < 0 ? progress_.completed_steps[w] : std::min(slowest, progress_.completed_steps[w]);
  }
  return slowest;
}

std::vector<int> WorkerRoster::Present() const {
  std::vector<int> present;
  for (int w = 0; w < size(); ++w) {
    if (seen_[w] && !absent_[w] && !progress_.done[w] && !progress_.lost[w]) present.push_back(w);
  }
  return present;
}

std::vector<int> WorkerRoster::Absent() const {
  std::vector<int> absent;
  for (int w = 0; w < size(); ++w) {
    if (absent_[w]) absent.push_back(w);
  }
  return absent;
}

void WorkerRoster::Heard(int worker, absl::Time now, int64_t step) {
  last_seen_[worker] = now;
  seen_[worker] = true;
  last_step_[worker] = std::max(last_step_[worker], step);
}

void WorkerRoster::Pushed(int worker, absl::Time now, int64_t step, int64_t local_step) {
  Heard(worker, now, step);
  progress_.completed_steps[worker] = std::max(progress_.completed_steps[worker], local_step + 1);
}

void WorkerRoster::ResumeAt(int64_t step) {
  progress_.completed_steps.assign(size(), step);
  last_step_.assign(size(), step - 1);
}

bool WorkerRoster::NoteIncarnation(int worker, uint64_t incarnation) {
  if (incarnation == 0) return false;
  const bool restarted = incarnation_[worker] != 0 && incarnation_[worker] != incarnation;
  incarnation_[worker] = incarnation;
  return restarted;
}

bool WorkerRoster::Rejoin(int worker, int64_t repeats_below, absl::Time now) {
  rejoined_[worker] = true;
  rejoin_versions_[worker] = repeats_below;
  const bool was_lost = progress_.lost[worker];
  // A new process: it neither waits for data nor has finished pushing.
  progress_.lost[worker] = false;
  progress_.paused[worker] = false;
  finished_pushing_[worker] = false;
  if (!progress_.done[worker]) departed_[worker] = false;
  last_seen_[worker] = now;
  return was_lost;
}

void WorkerRoster::ForgetRepeats() { rejoin_versions_.assign(size(), 0); }

bool WorkerRoster::FinishedPushing(int worker) {
  finished_pushing_[worker] = true;
  return !departed_[worker].exchange(true);
}

WorkerRoster::Pause WorkerRoster::SetPaused(int worker, bool paused) {
  if (paused == progress_.paused[worker]) return Pause::kUnchanged;
  progress_.paused[worker] = paused;
  if (paused) {
    departed_[worker] = true;
    return Pause::kPaused;
  }
  if (!finished_pushing_[worker] && !progress_.done[worker] && !progress_.lost[worker]) departed_[worker] = false;
  progress_.completed_steps[worker] = std::max(progress_.completed_steps[worker], SlowestOtherThan(worker));
  return Pause::kResumed;
}

bool WorkerRoster::Done(int worker, const WorkerReport& report) {
  if (progress_.done[worker]) return false;
  progress_.done[worker] = true;
  reports_.push_back(report);
  departed_[worker] = true;
  return true;
}

void WorkerRoster::Lose(int worker) {
  progress_.lost[worker] = true;
  departed_[worker] = true;
}

std::vector<int> WorkerRoster::Lost() const {
  std::vector<int> lost;
  for (int w = 0; w < size(); ++w) {
    if (progress_.lost[w]) lost.push_back(w);
  }
  return lost;
}

bool WorkerRoster::AllDoneOrLost() const {
  // Absent workers count once the run has ended for someone (before that,
  // everyone may still be on the way).
  const bool ended = !reports_.empty();
  for (int w = 0; w < size(); ++w) {
    if (!progress_.done[w] && !progress_.lost[w] && !(absent_[w] && ended)) return false;
  }
  return true;
}

std::vector<WorkerRoster::Silent> WorkerRoster::SilentWorkers(absl::Time now, absl::Duration lost_after,
                                                              absl::Duration startup) const {
  std::vector<Silent> silent_workers;
  for (int w = 0; w < size(); ++w) {
    if (progress_.done[w] || progress_.lost[w] || absent_[w]) continue;
    const absl::Duration limit = seen_[w] ? lost_after : startup;
    const absl::Duration silent = now - last_seen_[w];
    if (silent <= limit) continue;
    std::string what = seen_[w] ? absl::StrCat("worker ", w, " lost: no heartbeat for ", absl::FormatDuration(silent),
                                               " (last step ", last_step_[w], ")")
                                : absl::StrCat("worker ", w, " never connected within startup_seconds (",
                                               absl::FormatDuration(limit), ")");
    silent_workers.push_back({w, silent, std::move(what)});
  }
  return silent_workers;
}

}  // namespace pstrain
