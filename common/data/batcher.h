// ShardedBatcher: the examples one worker trains on at each step.
//
// Contract (relied on by the cross-strategy exactness tests, so keep it):
//   G   = num_workers * batch_per_worker          (the global batch)
//   spe = steps_per_epoch() = num_examples / G    (floor; the tail is dropped)
//   For step t, epoch e = t / spe. perm_e is a permutation of [0, n) computed
//   from (seed, e) alone -- Fisher-Yates over std::mt19937_64 with a portable
//   bounded draw, so every worker and machine gets the same one -- or the
//   identity when shuffle is false. The global batch of step t is
//   perm_e[(t % spe) * G, +G), and worker w takes its sub-slice
//   [w * b, (w + 1) * b), in order.
// Consequences: one worker with batch W*b sees exactly the concatenation of the
// batches of W workers with batch b at the same step; within an epoch no
// example is used twice.
//
// Encoded datasets (Dataset::decoder) are decoded into the batch by a
// DecodePool, example i of epoch e with DecodeSeed(seed, e, i): the same
// augmented example whichever worker, replica or thread decodes it, so the
// contract above holds for them too.
//
// Thread safety: Fill and FillRange may be called concurrently on one instance.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/data/decode_pool.h"
#include "common/tensor.h"

namespace pstrain {

class ShardedBatcher {
 public:
  // `data` must outlive the batcher. INVALID_ARGUMENT when data is null or
  // invalid, num_workers < 1, worker_index outside [0, num_workers),
  // batch_per_worker < 1, or the dataset holds fewer than one global batch.
  static absl::StatusOr<ShardedBatcher> Create(const Dataset* data, int worker_index, int num_workers,
                                               int batch_per_worker, uint64_t seed, bool shuffle);

  ShardedBatcher(ShardedBatcher&&) noexcept;
  ShardedBatcher& operator=(ShardedBatcher&&) noexcept;
  ~ShardedBatcher();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t global_batch() const { return int64_t{num_workers_} * batch_per_worker_; }
  int batch_per_worker() const { return batch_per_worker_; }
  const Dataset& dataset() const { return *data_; }

  // The dataset indices of this worker's examples at `step` (>= 0), in batch order.
  std::vector<int64_t> ExampleIndices(int64_t step) const;

  // Epoch `epoch`'s permutation (see the contract), positions [first,
  // first + count): the dataset indices there. Requires 0 <= first and
  // first + count <= the dataset's examples.
  std::vector<int64_t> EpochPositions(int64_t epoch, int64_t first, int64_t count) const;
  // Copies batch_per_worker() examples at positions [first, +batch) of
  // `epoch`'s permutation, as Fill does (data.sharding dynamic: the ledger
  // names the positions; the worker index plays no part). OUT_OF_RANGE when
  // the positions pass the dataset's end.
  absl::Status FillPositions(int64_t epoch, int64_t first, Tensor* images, std::vector<int32_t>* labels,
                             DecodePool* pool = nullptr) const;

  // Copies this worker's batch for `step` into *images ([b,C,H,W]) and *labels
  // (b entries); an encoded dataset is decoded with the training transform
  // on `pool` (required for one: FAILED_PRECONDITION without). *images is
  // written in place when it is a CPU tensor of that shape, and replaced by
  // a new tensor otherwise (e.g. when empty). Errors: the decoder's.
  absl::Status Fill(int64_t step, Tensor* images, std::vector<int32_t>* labels, DecodePool* pool = nullptr) const;

  // Copies examples [first_example, first_example + count) in dataset order,
  // ignoring sharding and shuffling: evaluation batches over a test set
  // (encoded ones with the evaluation transform). The range must lie inside
  // the dataset; *images follows Fill's rule with shape [count,C,H,W].
  absl::Status FillRange(int64_t first_example, int64_t count, Tensor* images, std::vector<int32_t>* labels,
                         DecodePool* pool = nullptr) const;

 private:
  struct EpochCache;
  ShardedBatcher(const Dataset* data, int worker_index, int num_workers, int batch_per_worker, uint64_t seed,
                 bool shuffle);

  // Copies (decodes, in `epoch`, with the training transform when `train`)
  // the given examples; shared by Fill and FillRange.
  absl::Status Gather(const std::vector<int64_t>& indices, int64_t epoch, bool train, Tensor* images,
                      std::vector<int32_t>* labels, DecodePool* pool) const;

  const Dataset* data_;
  int worker_index_;
  int num_workers_;
  int batch_per_worker_;
  uint64_t seed_;
  bool shuffle_;
  int64_t steps_per_epoch_;
  std::unique_ptr<EpochCache> cache_;  // The permutation of the epoch used last.
};

}  // namespace pstrain
