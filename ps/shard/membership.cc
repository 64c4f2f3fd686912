// Who takes part in a shard's run (ShardMembership, membership.h).
#include "ps/shard/membership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"

namespace pstrain {

void ShardMembership::Note(int worker, uint64_t incarnation, int64_t step) {
  if (roster_.Arrive(worker, absl::Now())) {
    Record(worker, step, "joined", absl::StrCat("first request; ", roster_.Present().size(), " workers present"));
  }
  if (!roster_.NoteIncarnation(worker, incarnation)) return;
  // Gradients the old process pushed for steps still being aggregated may
  // arrive again from the new one (the same step, the same data): they are
  // dropped, not refused as duplicates.
  const bool was_lost = roster_.Rejoin(worker, step + 1, absl::Now());
  LOG(WARNING) << "shard " << shard_index_ << ": worker " << worker
               << " rejoined (a new process); its repeated gradients for steps below " << step + 1 << " are dropped"
               << (was_lost ? "; it is no longer lost" : "");
  // The old process's chunk is not coming back, nor does its pace count.
  if (ledger_) ledger_->Release(worker);
  stragglers_.Forget(worker);
  Record(worker, step, "rejoined", was_lost ? "a new process of a lost worker" : "a new process");
}

void ShardMembership::Lose(int worker, int64_t step, const std::string& why) {
  roster_.Lose(worker);
  if (ledger_) ledger_->Release(worker);
  stragglers_.Forget(worker);
  Record(worker, step, "lost", why);
}

void ShardMembership::NotePace(int worker, int64_t local_step, double busy_seconds) {
  VLOG(2) << "shard " << shard_index_ << ": worker " << worker << " pace: step " << local_step << " busy "
          << busy_seconds << " s";
  if (!stragglers_.Observe(worker, local_step, busy_seconds)) return;
  for (const Straggler& s : stragglers_.Current()) {
    if (s.worker() != worker) continue;
    LOG(WARNING) << "shard " << shard_index_ << ": worker " << worker << " is a straggler: its busy time per step is "
                 << absl::StrFormat("%.2f", s.ratio()) << "x its peers' typical step (at its step " << local_step
                 << ")";
    return;
  }
  LOG(WARNING) << "shard " << shard_index_ << ": worker " << worker << " keeps pace again (at its step " << local_step
               << ")";
}

void ShardMembership::Report(StatsResponse* stats, int64_t ledger_before_step, bool with_ledger_state) const {
  for (const WorkerReport& r : roster_.reports()) *stats->add_done() = r;
  for (int w : roster_.Lost()) stats->add_lost(w);
  for (int w : roster_.Present()) stats->add_present(w);
  for (int w : roster_.Absent()) stats->add_absent(w);
  for (const MembershipChange& c : changes_) *stats->add_membership() = c;
  for (const Straggler& s : stragglers_.named()) *stats->add_stragglers() = s;
  if (ledger_) {
    *stats->mutable_ledger() = ledger_->Report();
    if (with_ledger_state) *stats->mutable_ledger_state() = ledger_->State(ledger_before_step);
  }
}

void ShardMembership::Record(int worker, int64_t step, const std::string& change, const std::string& why) {
  MembershipChange entry;
  entry.set_step(step);
  entry.set_worker(worker);
  entry.set_change(change);
  entry.set_why(why);
  entry.set_seconds(absl::ToDoubleSeconds(absl::Now() - created_));
  LOG(WARNING) << "shard " << shard_index_ << ": membership: worker " << worker << " " << change << " at step "
               << entry.step() << " (" << why << ")";
  changes_.push_back(std::move(entry));
}

}  // namespace pstrain
