// ElasticGroup: who is in an elastic all-reduce run, and their Gloo
// communicator, generation by generation (docs/ELASTIC.md).
//
// The chief (worker 0) decides each generation and writes it to the
// rendezvous store it hosts (worker/collective/cluster_store.h); the chief
// is in every generation, and losing it ends the run. Keys, under the
// options' prefix:
//   join/<w>        worker w asks to be in the group (value: its incarnation)
//   gen/<g>         generation g: its members with their incarnations, the
//                   root whose state everyone takes, and why it formed
//   latest          the newest generation's number
//   alive/<g>/<w>   generation g's communicator broke; worker w is still
//                   there, having committed the given step
//   report/<w>      worker w's final report (ElasticGroup::Report)
// Generation g's members meet as the Gloo communicator "<prefix>/g<g>",
// ranks in ascending worker order (the chief is rank 0).
//
// A generation changes at a step boundary for three reasons, every member
// taking part at the same point of its step loop:
//   - AdmitJoiners: the chief has join requests (a worker started mid-run,
//     or one left out earlier); the next generation adds them, root the chief;
//   - Regroup: an operation failed (a peer died or stalled past the
//     timeout). Each member closes its communicator at once (so the failure
//     reaches the others within milliseconds rather than at their timeouts)
//     and says it is alive; the chief waits regroup_window for the members
//     of the broken generation, then forms the next one from those that
//     answered plus any joiners, root the one that committed the most steps;
//     a member that did not answer in time is left out (it may join again);
//   - Shrink: the data left for the run's last step is fewer batches than
//     members; the first ones stay, the rest leave.
//
// Nothing waits without a deadline: joins wait startup, regroups the window
// plus the connect timeout, operations op_timeout.
//
// Thread-compatible: the training loop's thread calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"
#include "worker/collective/collective.h"
#include "worker/collective/kv_store.h"

namespace pstrain {

struct GroupGeneration {
  int64_t number = -1;
  std::vector<int> members;               // worker indices, ascending: their ranks
  std::vector<std::string> incarnations;  // per member
  int root = 0;                           // the worker whose state everyone takes
  std::string why;                        // what formed it, in words
  // This worker's rank in it; -1 when it is not a member.
  int RankOf(int worker) const;
  std::string Encode() const;
  static absl::StatusOr<GroupGeneration> Decode(int64_t number, const std::string& text);
};

class ElasticGroup {
 public:
  struct Options {
    KeyValueStore* store = nullptr;  // not owned; the chief's ClusterStore
    std::string prefix;              // e.g. "elastic/<run name>"
    int worker = 0;
    int listed_workers = 1;
    // The fewest workers the first generation waits for (elastic.min_workers;
    // 0: every listed worker), and the fewest any generation may have (>= 1).
    int start_workers = 0;
    int min_workers = 1;
    // Where this worker's Gloo listens (CollectiveOptions::host).
    std::string host;
    absl::Duration op_timeout = absl::Seconds(60);
    absl::Duration startup = absl::Seconds(120);
    absl::Duration regroup_window = absl::Seconds(5);
  };
  explicit ElasticGroup(const Options& options);
  ~ElasticGroup();

  // Asks to be in the group and connects in the first generation that has
  // this worker (this incarnation): the run's first (the chief forms it once
  // every listed worker asked, or min_workers did and no other came within
  // regroup_window), or one a running group forms at a step boundary. Errors: not
  // admitted within `startup`; the chief's store unreachable.
  absl::Status Join();
  // At a step boundary (`step` committed), every member: the chief tells
  // the others whether workers wait to join; if so, all connect in the next
  // generation. True when the group changed.
  absl::StatusOr<bool> AdmitJoiners(int64_t step);
  // After a failed operation, `committed` being the last step this worker
  // committed: see the file comment. NOT_FOUND when this worker was left
  // out (Join again); FAILED_PRECONDITION when fewer than min_workers are
  // left.
  absl::Status Regroup(int64_t committed);
  // Keeps the first `keep` members (0 < keep < size) for the run's last
  // step; the others leave (left() turns true).
  absl::Status Shrink(int keep, int64_t step);
  // Every member of the current generation: waits until all arrive, so no
  // member closes its connections while another still reads from them.
  absl::Status Barrier();

  // The final report: every worker stores its own; the chief gathers those
  // of `workers` (within op_timeout).
  absl::Status PutReport(const WorkerReport& report);
  absl::StatusOr<std::vector<WorkerReport>> GatherReports(const std::vector<int>& workers);

  Collective* collective() { return collective_.get(); }
  const GroupGeneration& generation() const { return generation_; }
  int rank() const { return generation_.RankOf(options_.worker); }
  int size() const { return static_cast<int>(generation_.members.size()); }
  bool left() const { return left_; }
  // Chief: every worker that joined, was lost or left, in order; and the
  // workers that finished (final members and those that left at the end).
  const std::vector<MembershipChange>& changes() const { return changes_; }
  std::vector<int> finishers() const;

 private:
  bool chief() const { return options_.worker == 0; }
  std::string Key(const std::string& suffix) const;
  // Chief: forms, records and publishes generation `number`.
  absl::Status Publish(GroupGeneration next);
  // Chief: the run's first generation, once enough workers asked.
  absl::Status FormFirst();
  // Chief: listed workers (not members) whose join request is new.
  std::vector<std::pair<int, std::string>> PendingJoiners();
  // Waits for generation `number` and connects in it when this worker is a
  // member (NOT_FOUND otherwise).
  absl::Status ConnectTo(int64_t number, absl::Time deadline);
  absl::Status Connect(const GroupGeneration& g);
  void Record(int64_t step, int worker, const std::string& change, const std::string& why);

  const Options options_;
  std::string incarnation_;  // this process's, new at each Join
  const absl::Time start_;
  GroupGeneration generation_;
  std::unique_ptr<Collective> collective_;
  bool left_ = false;
  // Chief.
  std::vector<MembershipChange> changes_;
  std::vector<int> left_workers_;   // left at the end (Shrink)
  std::set<std::string> admitted_;  // incarnations ever in a generation
};

}  // namespace pstrain
