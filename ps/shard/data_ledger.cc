#include "ps/shard/data_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<DataLedger> DataLedger::Create(const LedgerSpec& spec, int num_workers) {
  auto positive = [](const char* field, int64_t v) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("data ledger: ", field, " must be > 0, got ", v));
  };
  if (absl::Status s = positive("examples_per_epoch", spec.examples_per_epoch()); !s.ok()) return s;
  if (absl::Status s = positive("epochs", spec.epochs()); !s.ok()) return s;
  if (absl::Status s = positive("chunk_examples", spec.chunk_examples()); !s.ok()) return s;
  if (absl::Status s = positive("workers", num_workers); !s.ok()) return s;
  // total_examples > epochs x examples_per_epoch, without overflow.
  if (spec.total_examples() < 0 ||
      (spec.total_examples() > 0 && (spec.total_examples() - 1) / spec.epochs() >= spec.examples_per_epoch())) {
    return absl::InvalidArgumentError(absl::StrCat("data ledger: total_examples ", spec.total_examples(),
                                                   " is outside [0, epochs x examples_per_epoch]"));
  }
  const int64_t per_epoch = (spec.examples_per_epoch() + spec.chunk_examples() - 1) / spec.chunk_examples();
  if (per_epoch > kMaxChunks / spec.epochs()) {
    return absl::InvalidArgumentError(absl::StrCat("data ledger: ", per_epoch, " chunks per epoch x ", spec.epochs(),
                                                   " epochs is more than ", kMaxChunks,
                                                   " chunks (raise data.chunk_batches)"));
  }
  DataLedger ledger(spec, num_workers);
  for (uint64_t id : spec.state().completed()) {
    if (id >= static_cast<uint64_t>(ledger.total_chunks_)) {
      return absl::InvalidArgumentError(
          absl::StrCat("data ledger: restored chunk ", id, " is outside the run's ", ledger.total_chunks_, " chunks"));
    }
    if (ledger.completed_[id]) continue;
    ledger.completed_[id] = true;
    const DataChunk chunk = ledger.ChunkOf(id);
    ledger.examples_done_[chunk.epoch()] += chunk.count();
  }
  return ledger;
}

DataLedger::DataLedger(const LedgerSpec& spec, int num_workers)
    : spec_(spec),
      chunks_per_epoch_((spec.examples_per_epoch() + spec.chunk_examples() - 1) / spec.chunk_examples()),
      total_chunks_(ChunksOfRun(spec, chunks_per_epoch_)),
      completed_(total_chunks_, false),
      last_step_(total_chunks_, 0),
      held_(num_workers, -1),
      examples_by_worker_(num_workers, 0),
      examples_done_(spec.epochs(), 0) {
  spec_.clear_state();
  if (spec_.total_examples() == 0) spec_.set_total_examples(spec.epochs() * spec.examples_per_epoch());
}

int64_t DataLedger::ChunksOfRun(const LedgerSpec& spec, int64_t chunks_per_epoch) {
  const int64_t total = spec.total_examples() > 0 ? spec.total_examples() : spec.epochs() * spec.examples_per_epoch();
  const int64_t full_epochs = total / spec.examples_per_epoch();
  const int64_t rest = total % spec.examples_per_epoch();
  return full_epochs * chunks_per_epoch + (rest + spec.chunk_examples() - 1) / spec.chunk_examples();
}

DataChunk DataLedger::ChunkOf(uint64_t id) const {
  DataChunk chunk;
  chunk.set_id(id);
  chunk.set_epoch(static_cast<int64_t>(id) / chunks_per_epoch_);
  chunk.set_first((static_cast<int64_t>(id) % chunks_per_epoch_) * spec_.chunk_examples());
  const int64_t start = chunk.epoch() * spec_.examples_per_epoch() + chunk.first();
  chunk.set_count(
      std::min({spec_.chunk_examples(), spec_.examples_per_epoch() - chunk.first(), spec_.total_examples() - start}));
  return chunk;
}

void DataLedger::Complete(int worker, const CompletedChunk& done) {
  if (held_[worker] < 0 || static_cast<uint64_t>(held_[worker]) != done.id()) {
    ++refused_;  // not (or no longer) this worker's: it was lost meanwhile
    return;
  }
  held_[worker] = -1;
  completed_[done.id()] = true;
  last_step_[done.id()] = done.last_step();
  const DataChunk chunk = ChunkOf(done.id());
  examples_done_[chunk.epoch()] += chunk.count();
  examples_by_worker_[worker] += chunk.count();
}

int64_t DataLedger::TakeFree() {
  while (!returned_.empty()) {
    const uint64_t id = returned_.front();
    returned_.pop_front();
    if (!completed_[id]) {
      ++reassigned_;
      return static_cast<int64_t>(id);
    }
  }
  while (next_ < static_cast<uint64_t>(total_chunks_) && completed_[next_]) ++next_;
  if (next_ >= static_cast<uint64_t>(total_chunks_)) return -1;
  return static_cast<int64_t>(next_++);
}

ChunkResponse DataLedger::Exchange(int worker, const ChunkRequest& request) {
  for (const CompletedChunk& done : request.completed()) Complete(worker, done);
  Release(worker);  // a chunk still held was given up
  ChunkResponse response;
  const int64_t id = TakeFree();
  if (id >= 0) {
    held_[worker] = id;
    *response.mutable_chunk() = ChunkOf(id);
    return response;
  }
  const bool others_hold = std::any_of(held_.begin(), held_.end(), [](int64_t h) { return h >= 0; });
  if (others_hold) {
    response.set_wait(true);
  } else {
    response.set_end(true);
  }
  return response;
}

void DataLedger::Release(int worker) {
  if (held_[worker] < 0) return;
  returned_.push_front(static_cast<uint64_t>(held_[worker]));
  held_[worker] = -1;
}

LedgerReport DataLedger::Report() const {
  LedgerReport report;
  report.set_examples_per_epoch(spec_.examples_per_epoch());
  report.set_chunk_examples(spec_.chunk_examples());
  report.set_total_examples(spec_.total_examples());
  for (int64_t n : examples_done_) report.add_examples_done(n);
  report.set_chunks_reassigned(reassigned_);
  report.set_completions_refused(refused_);
  for (int64_t n : examples_by_worker_) report.add_examples_by_worker(n);
  return report;
}

LedgerState DataLedger::State(int64_t before_step) const {
  LedgerState state;
  for (int64_t id = 0; id < total_chunks_; ++id) {
    if (completed_[id] && (before_step <= 0 || last_step_[id] < before_step)) state.add_completed(id);
  }
  return state;
}

}  // namespace pstrain
