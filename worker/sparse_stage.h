// SparseStage: the embedding half of a sparse model's step on one worker
// (model.tables; docs/EMBEDDINGS.md, "The model half").
//
// Around the replicas' forward and backward of each step:
//   Pull     the ids of every replica's examples, per table (feature f is
//            looked up in table f), deduplicated over the whole worker into
//            row keys, and one SparsePull per table (EmbeddingClient: one
//            request per shard); under sync it waits for the step's version,
//            so every worker reads the rows of the same updates;
//   Compose  replica r's model input: its dense features [b, 1, 1, D], then
//            per table the example's pooled bag, [b, 1, 1, D + sum of dims]:
//            the sum of the bag's rows, or with the table's `pooling: mean`
//            their mean (an id twice in a bag counts twice); a missing
//            feature (an empty bag) pools to zeros;
//   Push     each replica's input gradient: the pooled columns added onto
//            the rows of the bag's ids (divided by the bag's length for
//            mean pooling) over every replica and example, divided by
//            the replicas and by the loss scale (the mean over the worker's
//            batch, as its dense gradients are averaged), one SparsePush
//            per table. Under sync the shard sums the workers' pushes and
//            divides by the workers: one device's gradient with the whole
//            batch.
// Evaluation composes test batches the same way (ComposeBatch), pulling
// without waiting for a version and pushing nothing.
//
// CPU replicas only: the model input and its gradient are host tensors.
// Not thread-safe: the worker's training thread calls it (Compose may run
// on the replicas' threads at once, reading what Pull left).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/dataset.h"
#include "common/tensor.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "worker/embedding_client.h"
#include "worker/replica_set.h"

namespace pstrain {

class SparseStage {
 public:
  // Connects to the shards' tables. InvalidArgument when the model's input
  // is not the `dense_features` (per example) plus every table's row, or a
  // replica is not a CPU one.
  static absl::StatusOr<std::unique_ptr<SparseStage>> Create(const ExperimentConfig& config, int worker_index,
                                                             Transport* transport, ReplicaSet* replicas,
                                                             int64_t dense_features);

  // Before the replicas' forward of `step`: `examples[r]` holds the dataset
  // indices of replica r's batch, in batch order.
  absl::Status Pull(int64_t step, const Dataset& data, const std::vector<std::vector<int64_t>>& examples);
  // Replica r's model input for the pulled step, from its dense batch
  // [b, 1, 1, D]; `input` is reshaped when it is not [b] + the model's input.
  void Compose(int r, const Tensor& dense, Tensor* input) const;
  // After every replica's backward of `step`.
  absl::Status Push(int64_t step);

  // Examples [first, first + count) of `data` (a test set) as one model
  // input, for evaluation: their rows pulled as they are now.
  absl::Status ComposeBatch(const Dataset& data, int64_t first, int64_t count, const Tensor& dense, Tensor* input);

  // The generation of the shards' state the run now works on (the
  // strategy's, after its pulls): requests of an older one are refused.
  void SetGeneration(int64_t generation) { client_->set_generation(generation); }

  int64_t bytes_sent() const { return client_->bytes_sent(); }
  int64_t bytes_received() const { return client_->bytes_received(); }

 private:
  // One table's share of a pull: its keys, each bag slot's key (-1: no
  // id), rows.
  struct TableBatch {
    SparseKeys keys;
    int bag = 1;                  // slots per example (the dataset's bag_size)
    std::vector<int32_t> key_of;  // per example position (replica-major) and slot: index into keys.keys, or -1
    std::vector<float> rows;      // keys.keys.size() * dim
  };

  SparseStage(const ExperimentConfig& config, std::unique_ptr<EmbeddingClient> client, ReplicaSet* replicas,
              int64_t dense_features);
  // Deduplicates and pulls every table for the examples `examples` of
  // `data` (concatenated, in order) into `batches`.
  absl::Status PullRows(const Dataset& data, const std::vector<int64_t>& examples, int64_t min_version,
                        std::vector<TableBatch>* batches);
  // Writes examples [first, first + count) of `batches` after `dense`'s
  // features into `input`.
  void ComposeRange(const std::vector<TableBatch>& batches, int64_t first, int64_t count, const Tensor& dense,
                    Tensor* input) const;

  const ExperimentConfig config_;
  std::unique_ptr<EmbeddingClient> client_;
  ReplicaSet* const replicas_;
  const int64_t dense_features_;     // D
  std::vector<int64_t> row_offset_;  // per table: its first column after the dense features
  std::vector<bool> mean_;           // per table: pooling "mean" (else "sum")
  int64_t input_width_ = 0;          // D + the tables' dims
  bool sync_ = false;
  std::vector<int64_t> replica_first_;  // example position where replica r's batch starts
  std::vector<int64_t> replica_count_;
  std::vector<TableBatch> step_;  // the pulled step
  std::vector<TableBatch> eval_;  // the last evaluation batch
};

}  // namespace pstrain
