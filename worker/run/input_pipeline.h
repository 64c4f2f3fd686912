// InputPipeline: the examples a worker trains on, step by step, and the
// test set its chief evaluates on (what tf_cnn_benchmarks' preprocessing.py
// is to its benchmark: the training loop consumes it through Next and Fill).
//
//   Create   the datasets (common/data/: in memory, or encoded and decoded
//            batch by batch on a pool), one batcher per replica over this
//            worker's share of every step's global batch, the prefetchers of
//            encoded data under static sharding, the run's length
//   Next     the step's batch: static sharding: every step below
//            total_steps; data.sharding dynamic: the next batch of the chunk
//            the data ledger lent (ConnectLedger), possibly at a later step
//            (after a pause), none once the run's data is done
//   Fill     a replica's examples of the step into its buffers
//
// Not thread-safe, but Fill may run for different replicas at once (each
// touches its own batcher, prefetcher and buffers).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/batcher.h"
#include "common/data/data_source.h"
#include "common/data/decode_pool.h"
#include "common/data/prefetcher.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "worker/chunk_feed.h"

namespace pstrain {

class InputPipeline {
 public:
  // Worker `worker_index`'s pipeline for `config` (the test split loaded
  // when `with_test`). Errors: the data source's, naming the file or field.
  static absl::StatusOr<std::unique_ptr<InputPipeline>> Create(const ExperimentConfig& config, int worker_index,
                                                               bool with_test);

  const Dataset& train() const { return data_.train; }
  const Dataset& test() const { return data_.test; }
  // The steps every worker runs (an upper bound with dynamic sharding).
  int64_t total_steps() const { return total_steps_; }
  // data.sharding dynamic: the ledger the chief installs on PS shard 0;
  // null with static sharding.
  const LedgerSpec* ledger() const { return dynamic_ ? &ledger_spec_ : nullptr; }
  // data.sharding dynamic: where finished chunks are reported and new ones
  // come from, and how the worker pauses while it waits for one (the
  // strategy's shards; ChunkFeed::Options). Before the first Next.
  void ConnectLedger(ChunkFeed::Exchange exchange, std::function<absl::Status()> pause,
                     std::function<absl::StatusOr<int64_t>(int64_t step)> resume, absl::Duration wait_limit);

  // Makes the batch of `step` the current one and returns the step it is
  // trained at: `step`, or with dynamic sharding a later one when the worker
  // paused for data meanwhile (ChunkFeed). None when this worker's data has
  // ended. Errors: the ledger's, prefixed "data ledger: ".
  absl::StatusOr<std::optional<int64_t>> Next(int64_t step);
  // Replica `replica`'s examples of the current step (`step`) into
  // images(replica) and labels(replica). Errors: the decoder's, naming the
  // record.
  absl::Status Fill(int replica, int64_t step);
  const Tensor& images(int replica) const { return images_[replica]; }
  const int32_t* labels(int replica) const { return labels_[replica].data(); }
  // The dataset indices of replica `replica`'s examples of the current step
  // (the sparse stage pulls their rows).
  std::vector<int64_t> ExampleIndices(int replica, int64_t step) const;
  // The shards were restored: the ledger's chunk in hand is no longer this
  // worker's.
  void Forget();
  // The pool encoded data decodes on (evaluation too); null for data in memory.
  DecodePool* decode_pool() const { return decode_pool_.get(); }

 private:
  InputPipeline(const ExperimentConfig& config, Datasets data);
  absl::Status CreateBatchers(int worker_index);
  void PlanLedger();

  const ExperimentConfig& config_;
  const int devices_;
  const bool dynamic_;
  Datasets data_;
  int64_t total_steps_ = 0;
  std::vector<ShardedBatcher> batchers_;  // one per replica
  std::unique_ptr<DecodePool> decode_pool_;
  // Encoded data under static sharding: one per replica.
  std::vector<std::unique_ptr<BatchPrefetcher>> prefetchers_;
  // Per replica: the batch buffers.
  std::vector<Tensor> images_;
  std::vector<std::vector<int32_t>> labels_;
  // data.sharding dynamic.
  LedgerSpec ledger_spec_;
  std::unique_ptr<ChunkFeed> feed_;
  ChunkFeed::Batch batch_;  // the current step's
};

}  // namespace pstrain
