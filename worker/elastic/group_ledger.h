// GroupLedger: data.sharding dynamic for an elastic all-reduce group
// (docs/ELASTIC.md), where there is no parameter server to keep the ledger.
//
// The run's examples are one stream: epoch e's examples are positions
// [0, examples_per_epoch) of its permutation (common/data/batcher.h), the
// epochs follow each other, and the stream ends at total_examples. Every
// step the member of rank r among `size` trains the stream's positions
// [next + r * b, +b), b being one worker's batch; examples_per_epoch and
// total_examples are multiples of b, so a slice never straddles two epochs.
// Once the step's all-reduce is done every member commits it: `next`
// advances by the members' slices, each counted to its epoch and worker.
//
// Every member keeps an identical copy (the same commits in the same order).
// A worker that joins, and a group that re-forms after a loss, take the copy
// of the member chosen as root (Encode/Decode, broadcast beside the
// variables), so each example is trained exactly once: a step no survivor
// committed is trained again by the new group from the same position, one
// a survivor committed is not.
//
// At the end fewer slices than members may be left: the members without one
// leave the group (ElasticGroup::Shrink) and the rest train them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace pstrain {

class GroupLedger {
 public:
  // INVALID_ARGUMENT naming the field when the spec has no examples or
  // epochs, `worker_batch` is not positive or does not divide
  // examples_per_epoch and total_examples, or `listed_workers` < 1.
  static absl::StatusOr<GroupLedger> Create(const LedgerSpec& spec, int64_t worker_batch, int listed_workers);

  // Rank `rank` of `size`'s slice of the current step; nullopt when the
  // stream ends before it.
  std::optional<DataChunk> Slice(int rank, int size) const;
  // How many of `size` members have a slice at the current step.
  int MembersWithData(int size) const;
  // The current step is done: `members` (worker indices in rank order) each
  // trained their slice (those past the stream's end had none).
  void Commit(const std::vector<int>& members);
  // Every example of the run is trained.
  bool done() const { return next_ >= total_; }
  // The stream's next position.
  int64_t next() const { return next_; }

  LedgerReport Report() const;
  // The state (next, examples per epoch, examples per worker) as int64s,
  // and back: Decode fails (INVALID_ARGUMENT) on a vector of another
  // length or a position outside the run.
  std::vector<int64_t> Encode() const;
  absl::Status Decode(const std::vector<int64_t>& state);
  // Encode's length for this ledger.
  size_t encoded_size() const { return 1 + examples_done_.size() + examples_by_worker_.size(); }

 private:
  GroupLedger(const LedgerSpec& spec, int64_t worker_batch, int listed_workers);

  LedgerSpec spec_;
  int64_t batch_ = 0;
  int64_t total_ = 0;
  int64_t next_ = 0;
  std::vector<int64_t> examples_done_;       // per epoch
  std::vector<int64_t> examples_by_worker_;  // per listed worker
};

}  // namespace pstrain
