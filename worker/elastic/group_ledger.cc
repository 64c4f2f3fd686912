#include "worker/elastic/group_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<GroupLedger> GroupLedger::Create(const LedgerSpec& spec, int64_t worker_batch, int listed_workers) {
  auto fail = [](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat("group ledger: ", what)); };
  if (spec.examples_per_epoch() <= 0) return fail(absl::StrCat("examples_per_epoch ", spec.examples_per_epoch()));
  if (spec.epochs() <= 0) return fail(absl::StrCat("epochs ", spec.epochs()));
  if (worker_batch <= 0) return fail(absl::StrCat("a worker's batch is ", worker_batch));
  if (listed_workers < 1) return fail(absl::StrCat("listed workers ", listed_workers));
  const int64_t total = spec.total_examples() > 0 ? spec.total_examples() : spec.epochs() * spec.examples_per_epoch();
  if (spec.examples_per_epoch() % worker_batch != 0 || total % worker_batch != 0) {
    return fail(absl::StrCat("examples_per_epoch ", spec.examples_per_epoch(), " and total_examples ", total,
                             " must be multiples of a worker's batch (", worker_batch, ")"));
  }
  if ((total - 1) / spec.examples_per_epoch() >= spec.epochs()) {
    return fail(absl::StrCat("total_examples ", total, " is more than epochs x examples_per_epoch"));
  }
  return GroupLedger(spec, worker_batch, listed_workers);
}

GroupLedger::GroupLedger(const LedgerSpec& spec, int64_t worker_batch, int listed_workers)
    : spec_(spec),
      batch_(worker_batch),
      total_(spec.total_examples() > 0 ? spec.total_examples() : spec.epochs() * spec.examples_per_epoch()),
      examples_done_(spec.epochs(), 0),
      examples_by_worker_(listed_workers, 0) {
  spec_.clear_state();
  spec_.set_total_examples(total_);
}

std::optional<DataChunk> GroupLedger::Slice(int rank, int size) const {
  const int64_t start = next_ + int64_t{rank} * batch_;
  if (rank < 0 || rank >= size || start >= total_) return std::nullopt;
  DataChunk chunk;
  chunk.set_id(static_cast<uint64_t>(start / batch_));
  chunk.set_epoch(start / spec_.examples_per_epoch());
  chunk.set_first(start % spec_.examples_per_epoch());
  chunk.set_count(batch_);
  return chunk;
}

int GroupLedger::MembersWithData(int size) const {
  const int64_t slices = (total_ - std::min(total_, next_)) / batch_;
  return static_cast<int>(std::min<int64_t>(size, slices));
}

void GroupLedger::Commit(const std::vector<int>& members) {
  const int size = static_cast<int>(members.size());
  for (int rank = 0; rank < size; ++rank) {
    const std::optional<DataChunk> slice = Slice(rank, size);
    if (!slice) break;
    examples_done_[slice->epoch()] += slice->count();
    const int worker = members[rank];
    if (worker >= 0 && worker < static_cast<int>(examples_by_worker_.size())) {
      examples_by_worker_[worker] += slice->count();
    }
  }
  next_ = std::min(total_, next_ + int64_t{size} * batch_);
}

LedgerReport GroupLedger::Report() const {
  LedgerReport report;
  report.set_examples_per_epoch(spec_.examples_per_epoch());
  report.set_chunk_examples(batch_);
  report.set_total_examples(total_);
  for (int64_t n : examples_done_) report.add_examples_done(n);
  for (int64_t n : examples_by_worker_) report.add_examples_by_worker(n);
  return report;
}

std::vector<int64_t> GroupLedger::Encode() const {
  std::vector<int64_t> state = {next_};
  state.insert(state.end(), examples_done_.begin(), examples_done_.end());
  state.insert(state.end(), examples_by_worker_.begin(), examples_by_worker_.end());
  return state;
}

absl::Status GroupLedger::Decode(const std::vector<int64_t>& state) {
  if (state.size() != encoded_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ledger: a state of ", state.size(), " numbers, expected ", encoded_size()));
  }
  if (state[0] < 0 || state[0] > total_ || state[0] % batch_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ledger: position ", state[0], " is not a batch boundary within the run's ", total_));
  }
  next_ = state[0];
  std::copy(state.begin() + 1, state.begin() + 1 + examples_done_.size(), examples_done_.begin());
  std::copy(state.begin() + 1 + examples_done_.size(), state.end(), examples_by_worker_.begin());
  return absl::OkStatus();
}

}  // namespace pstrain
