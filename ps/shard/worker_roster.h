// WorkerRoster: what a PS shard knows of each of its workers: when it was
// last heard from and at which step (liveness), the steps it has pushed
// (progress, the policies' WorkerProgress), its process incarnation and
// whether a restarted process rejoined, the report it sent with Done, and
// whether it departed (done, lost, finished pushing, or paused while it
// waits for data).
//
// Elastic runs (elastic.min_workers below the listed workers) start with
// every worker *absent*: departed, not waited for, never lost by silence.
// A worker arrives with its first request and is present from then on.
//
// Workers are 0 .. size()-1; callers check the range (PsShard validates every
// request's worker first). A worker is *silent* when it has not been heard
// from for longer than its limit: `lost_after` once it has been seen,
// `startup` before (measured from the roster's creation).
//
// Threads: not synchronised; the owner guards it with its mutex (PsShard::mu_)
// and calls every method with that held. Only the departed flags are atomics:
// the consistency policy reads them through departed() under any lock
// (ConsistencyOptions::departed), and they stay at the same address when the
// roster is moved.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "ps/consistency/consistency_policy.h"

namespace pstrain {

class WorkerRoster {
 public:
  // `num_workers` workers, none heard from yet; their startup limit counts
  // from `start`. `start_absent`: every worker is absent until it arrives.
  WorkerRoster(int num_workers, absl::Time start, bool start_absent = false);

  int size() const { return static_cast<int>(incarnation_.size()); }
  // Per worker: departed or not; valid for the roster's lifetime.
  const std::atomic<bool>* departed() const { return departed_.get(); }
  // Steps pushed, done and lost: what a consistency policy decides by.
  const WorkerProgress& progress() const { return progress_; }

  // Liveness and progress.
  // `worker` was heard from at `now`, at `step` (a heartbeat).
  void Heard(int worker, absl::Time now, int64_t step);
  // `worker` pushed its gradients of `step`, its `local_step`-th step (0
  // based): heard from, and has completed at least local_step + 1 steps.
  void Pushed(int worker, absl::Time now, int64_t step, int64_t local_step);
  // Every worker resumes at `step` (a restore): it has completed `step`
  // steps, the last one step - 1.
  void ResumeAt(int64_t step);

  // Presence.
  // `worker` sent a request at `now`. True when it was absent: it joins the
  // run (seen, no longer departed; under ssp its clock starts at the slowest
  // present worker's, so nobody waits for it to catch up). A worker that was
  // not absent is unchanged (heartbeats say it is alive).
  bool Arrive(int worker, absl::Time now);
  // Workers heard from and neither done, lost nor absent; workers absent.
  std::vector<int> Present() const;
  std::vector<int> Absent() const;

  // Incarnations.
  // Records `worker`'s process incarnation (0: unknown, ignored). True when
  // it differs from a known earlier one: the worker was restarted, and the
  // caller lets it Rejoin.
  bool NoteIncarnation(int worker, uint64_t incarnation);
  // A restarted `worker` rejoins at `now`: its gradients for steps below
  // `repeats_below` repeat its previous process's and are to be dropped, and
  // a lost worker counts again (no longer lost nor departed; a new process
  // is neither paused nor finished pushing). True when it was lost.
  bool Rejoin(int worker, int64_t repeats_below, absl::Time now);
  // Whether `worker`'s process rejoined after a restart.
  bool rejoined(int worker) const { return rejoined_[worker]; }
  // The step below which `worker`'s gradients are repeats (0: none).
  int64_t repeats_below(int worker) const { return rejoin_versions_[worker]; }
  // No worker repeats anything any more (a new generation starts).
  void ForgetRepeats();

  // Departures.
  // `worker` finished pushing; true the first time it departs.
  bool FinishedPushing(int worker);
  // `worker` pauses (waits for data: departed, not waited for) or resumes
  // (no longer departed unless it finished, is done or lost; its clock
  // moves up to the slowest present worker's, as on arrival). What changed.
  enum class Pause { kUnchanged, kPaused, kResumed };
  Pause SetPaused(int worker, bool paused);
  // `worker` said Done with `report`: done and departed. False (nothing
  // changes) when it was already done.
  bool Done(int worker, const WorkerReport& report);
  // `worker` is lost: departed, no longer waited for.
  void Lose(int worker);
  // The reports of the workers that are done, in the order they came.
  const std::vector<WorkerReport>& reports() const { return reports_; }
  // The lost workers, in index order.
  std::vector<int> Lost() const;
  // True when every worker is done or lost, or absent once one is done.
  bool AllDoneOrLost() const;

  // A worker neither done nor lost that has been silent past its limit.
  struct Silent {
    int worker;
    absl::Duration silent;
    // "worker 1 lost: no heartbeat for 3s (last step 7)", or "worker 1
    // never connected within startup_seconds (5s)".
    std::string what;
  };
  // The silent workers at `now`, in index order.
  std::vector<Silent> SilentWorkers(absl::Time now, absl::Duration lost_after, absl::Duration startup) const;

 private:
  // The fewest steps a present worker other than `worker` (and not paused)
  // has completed; -1 for none.
  int64_t SlowestOtherThan(int worker) const;

  WorkerProgress progress_;
  std::unique_ptr<std::atomic<bool>[]> departed_;
  std::vector<absl::Time> last_seen_;
  std::vector<int64_t> last_step_;
  std::vector<bool> seen_;
  std::vector<bool> absent_;
  std::vector<bool> finished_pushing_;
  // Per worker: its process's incarnation (0: unknown), whether a restarted
  // process rejoined, and the steps below which its repeats are dropped.
  std::vector<uint64_t> incarnation_;
  std::vector<bool> rejoined_;
  std::vector<int64_t> rejoin_versions_;
  std::vector<WorkerReport> reports_;
};

}  // namespace pstrain
