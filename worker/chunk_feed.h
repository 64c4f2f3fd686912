// ChunkFeed: a worker's batches under data.sharding dynamic (docs/ELASTIC.md).
//
// The ledger on PS shard 0 (ps/shard/data_ledger.h) leases the worker one chunk of
// an epoch's permutation at a time; the feed hands the chunk out a batch at
// a time (chunks are whole batches), and when it is used up reports it done
// with the request for the next. A chunk is reported only once the step
// after its last batch starts, so its gradients have been pushed and
// acknowledged by then.
//
// When the ledger has no free chunk but others still hold some, it says
// wait: the worker pauses (Options::pause: its steps stop counting, so
// nobody waits for it) and asks again every `poll` until a lost worker's
// chunk comes back, which it then trains (Options::resume: its steps count
// again, from the step resume names), or every chunk is done. So no chunk
// is left untrained while a worker is left to train it, in every
// consistency mode: under sync a worker that ended instead would leave the
// chunk of a worker lost late in the run to nobody.
//
// Not thread-safe: the training loop's thread calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace pstrain {

class ChunkFeed {
 public:
  // Reports finished chunks and returns the ledger's answer
  // (Strategy::ExchangeChunks).
  using Exchange = std::function<absl::StatusOr<ChunkResponse>(const std::vector<CompletedChunk>&)>;

  struct Options {
    int64_t batch_examples = 1;  // examples per step of this worker
    absl::Duration poll = absl::Milliseconds(100);
    // The longest the ledger may keep saying wait before Next fails.
    absl::Duration wait_limit = absl::Seconds(300);
    // Called when the ledger first says wait (the previous chunk reported),
    // and when a chunk ends the wait, before its first batch; resume returns
    // the step to train it at (ShardSession::PauseSteps, ResumeSteps). Null:
    // nothing to tell (the steps continue where they were).
    std::function<absl::Status()> pause;
    std::function<absl::StatusOr<int64_t>(int64_t step)> resume;
  };

  ChunkFeed(Exchange exchange, const Options& options);

  // Where this worker's batch lies: positions [first, first + batch) of
  // epoch `epoch`'s permutation; the step to train it at (the step asked
  // for, or a later one after a pause).
  struct Batch {
    int64_t epoch = 0;
    int64_t first = 0;
    int64_t step = 0;
  };
  // The batch to train at `step` (or at the step resume names); nullopt
  // when nothing is left for this worker. Errors: the exchange's, pause's
  // and resume's, a chunk that is not whole batches, or waiting past
  // wait_limit (naming it).
  absl::StatusOr<std::optional<Batch>> Next(int64_t step);
  // The shards' state was restored (a recovery): the chunk in hand is no
  // longer this worker's.
  void Forget();

  // Examples handed out in batches so far.
  int64_t examples() const { return examples_; }

 private:
  const Exchange exchange_;
  const Options options_;
  // Asks the ledger until it lends a chunk (true) or says the run's data is
  // done (false), pausing while it says wait; `completed` is reported first.
  absl::StatusOr<bool> Borrow(std::vector<CompletedChunk> completed, int64_t* step);

  std::optional<DataChunk> chunk_;
  int64_t used_ = 0;       // examples of chunk_ handed out
  int64_t last_step_ = 0;  // the step of chunk_'s latest batch
  int64_t examples_ = 0;
};

}  // namespace pstrain
