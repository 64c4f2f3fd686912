// ShardMembership: who takes part in one shard's run and what became of
// them -- the roster (worker_roster.h: liveness, progress, incarnations,
// departures), the log of joins, rejoins and losses (MembershipChange,
// reported in Stats and logged as they happen), the workers slower than
// their peers (straggler_watch.h), and the data ledger (data_ledger.h;
// data.sharding dynamic, shard 0 only), to which the chunk of a worker that
// is lost or restarted returns.
//
// Not thread-safe: PsShard holds it under its mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "ps/shard/data_ledger.h"
#include "ps/shard/straggler_watch.h"
#include "ps/shard/worker_roster.h"

namespace pstrain {

class ShardMembership {
 public:
  ShardMembership(int shard_index, WorkerRoster roster)
      : shard_index_(shard_index), stragglers_(roster.size()), roster_(std::move(roster)) {}

  WorkerRoster& roster() { return roster_; }
  const WorkerRoster& roster() const { return roster_; }
  StragglerWatch& stragglers() { return stragglers_; }
  const StragglerWatch& stragglers() const { return stragglers_; }

  // A push from `worker` at its `local_step`, reporting `busy_seconds` for
  // its previous step: a straggler named or cleared is logged.
  void NotePace(int worker, int64_t local_step, double busy_seconds);

  // A request from `worker` (process `incarnation`, 0: unknown) while the
  // shard's newest variable version is `step`: an absent worker joins; a new
  // process of a known worker rejoins (its gradients for steps up to `step`
  // repeat its old process's and are dropped; the old process's chunk
  // returns to the ledger; a lost worker counts again).
  void Note(int worker, uint64_t incarnation, int64_t step);
  // `worker` is lost at `step` (`why`): no longer waited for, its chunk
  // returns to the ledger.
  void Lose(int worker, int64_t step, const std::string& why);

  // The ledger: set by the chief's Init (replacing any earlier one); null
  // without one.
  void SetLedger(DataLedger ledger) { ledger_ = std::move(ledger); }
  DataLedger* ledger() { return ledger_ ? &*ledger_ : nullptr; }

  // Stats' membership part: the done reports, the lost, present and absent
  // workers, the changes, the stragglers named, the ledger's report (and,
  // `with_ledger_state`, its completed chunks before `ledger_before_step`).
  void Report(StatsResponse* stats, int64_t ledger_before_step, bool with_ledger_state) const;

 private:
  // A change, logged and kept for Report.
  void Record(int worker, int64_t step, const std::string& change, const std::string& why);

  const int shard_index_;
  StragglerWatch stragglers_;
  WorkerRoster roster_;
  std::vector<MembershipChange> changes_;  // in order
  const absl::Time created_ = absl::Now();
  std::optional<DataLedger> ledger_;
};

}  // namespace pstrain
