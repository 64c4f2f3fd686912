// DataLedger: data.sharding dynamic's record of who trains which examples,
// kept by PS shard 0 (docs/ELASTIC.md).
//
// Each epoch's examples (LedgerSpec.examples_per_epoch positions of the
// epoch's permutation) are cut into chunks of chunk_examples (the last one
// fewer; the run's last epoch stops at total_examples); chunks are handed out in id order (epoch by epoch), one at a
// time per worker. A worker reports the chunk it finished with its next request; a chunk counts once, when its holder
// reports it. A lost worker's chunk goes back to the front of the queue for the next worker that asks, and a late
// report of it from the lost worker is refused (counted). A worker asking while it still holds an unreported chunk gave
// that chunk up (it recovered from a restore): the chunk goes back too.
//
// So every example of every epoch is trained by exactly one completed chunk,
// whatever workers come and go, as long as someone is left to ask.
//
// Threads: not synchronised; PsShard guards it with its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace pstrain {

class DataLedger {
 public:
  // INVALID_ARGUMENT naming the field for a spec without examples, epochs or
  // chunk size, with more than kMaxChunks chunks, or whose state names a
  // chunk outside the run.
  static absl::StatusOr<DataLedger> Create(const LedgerSpec& spec, int num_workers);

  static constexpr int64_t kMaxChunks = int64_t{1} << 26;

  // `worker` (in range) reports `completed` and asks for its next chunk.
  ChunkResponse Exchange(int worker, const ChunkRequest& request);
  // `worker` left the run: the chunk it holds goes back to the queue.
  void Release(int worker);

  // Counts for result.json.
  LedgerReport Report() const;
  // The completed chunks whose last batch trained below `before_step` (0:
  // all of them): what a checkpoint at that step has trained.
  LedgerState State(int64_t before_step) const;

 private:
  DataLedger(const LedgerSpec& spec, int num_workers);
  // Chunks in the whole run (the last epoch's stop at total_examples).
  static int64_t ChunksOfRun(const LedgerSpec& spec, int64_t chunks_per_epoch);
  DataChunk ChunkOf(uint64_t id) const;
  void Complete(int worker, const CompletedChunk& chunk);
  // The next chunk nobody holds or completed, or -1.
  int64_t TakeFree();

  LedgerSpec spec_;
  int64_t chunks_per_epoch_ = 0;
  int64_t total_chunks_ = 0;
  // Per chunk: completed, and the step of its last batch.
  std::vector<bool> completed_;
  std::vector<int64_t> last_step_;
  // Chunks never handed out start at next_; released ones wait in returned_.
  uint64_t next_ = 0;
  std::deque<uint64_t> returned_;
  // Per worker: the chunk it holds (-1: none).
  std::vector<int64_t> held_;
  std::vector<int64_t> examples_by_worker_;
  std::vector<int64_t> examples_done_;  // per epoch
  int64_t reassigned_ = 0;
  int64_t refused_ = 0;
};

}  // namespace pstrain
