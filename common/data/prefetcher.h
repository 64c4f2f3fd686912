// BatchPrefetcher: prepares the batches of the next steps in the background
// while the current one trains, so decoding overlaps compute. One per
// replica; batches come from its ShardedBatcher (decoded on the worker's
// DecodePool for encoded datasets).
//
// Next(step) hands over the batch of `step`: at once when it was prepared,
// after waiting for it when it is being prepared, or filled on the spot when
// the steps jumped (a resume after recovery). Then it queues the `depth`
// steps after it. The time Next blocks is the run's input wait.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data/batcher.h"
#include "common/data/decode_pool.h"
#include "common/tensor.h"

namespace pstrain {

class BatchPrefetcher {
 public:
  // `batcher` and `pool` (null for in-memory datasets) outlive it; depth >= 1.
  BatchPrefetcher(const ShardedBatcher* batcher, DecodePool* pool, int depth);
  // Stops the background thread after the batch it is filling.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  // The batch of `step` into *images / *labels (buffers are swapped, not
  // copied: pass the same ones every step). Errors: the batch's fill error.
  absl::Status Next(int64_t step, Tensor* images, std::vector<int32_t>* labels) ABSL_LOCKS_EXCLUDED(mu_);

  // Total time Next has blocked so far.
  absl::Duration wait_time() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Slot {
    int64_t step = 0;
    bool ready = false;
    absl::Status status;
    Tensor images;
    std::vector<int32_t> labels;
  };

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // Queues the steps after `step` up to the depth.
  void QueueAfter(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShardedBatcher* const batcher_;
  DecodePool* const pool_;
  const int depth_;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<Slot>> queue_ ABSL_GUARDED_BY(mu_);   // in step order
  std::vector<std::unique_ptr<Slot>> spare_ ABSL_GUARDED_BY(mu_);  // buffers to reuse
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration waited_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pstrain
