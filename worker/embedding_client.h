// EmbeddingClient: a worker's sparse pulls and pushes of the run's embedding
// tables (model.tables) on the PS shards (ps/embedding/sparse_tables.h).
//
// A batch's feature ids are first deduplicated into row keys
// (common/embedding_keys.h); each key's row is pulled once and one gradient
// row per key is pushed. Every call fans out one request per shard, in
// parallel, over channels of its own (the dense PsClient's traffic does not
// queue in front of it), and waits for all of them.
//
// Sync runs: every worker pushes every step to every shard, with no keys
// where its batch touched none of a shard's rows, so each shard can tell
// when the step is complete.
//
// Not thread-safe: one caller at a time (a worker's training thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"

namespace pstrain {

// The rows one table's ids of a batch touch.
struct SparseKeys {
  // Each row key once, in order of first appearance.
  std::vector<uint64_t> keys;
  // For each id of the batch, the index of its key in `keys`.
  std::vector<int32_t> index;
};

// The row keys of `table`'s feature `ids`, each once.
SparseKeys DeduplicateIds(const EmbeddingTableConfig& table, absl::Span<const uint64_t> ids);

class EmbeddingClient {
 public:
  // Connects to every shard of config.cluster(). InvalidArgument when the
  // config has no tables or a table's wire_dtype is unknown.
  static absl::StatusOr<std::unique_ptr<EmbeddingClient>> Create(const ExperimentConfig& config, int worker_index,
                                                                 Transport* transport);

  int num_tables() const { return static_cast<int>(tables_.size()); }
  const EmbeddingTableConfig& table(int t) const { return tables_[t].config; }

  // The keys of table `t`'s feature `ids`, each once (DeduplicateIds).
  SparseKeys Deduplicate(int t, absl::Span<const uint64_t> ids) const { return DeduplicateIds(tables_[t].config, ids); }

  // Fills `rows` (keys.size() * dim floats, in key order) with the rows of
  // `keys` once table `t` has had `min_version` updates on every shard
  // holding one of them; `timeout` bounds the wait.
  absl::Status Pull(int t, const std::vector<uint64_t>& keys, int64_t min_version, absl::Duration timeout, float* rows);
  // Sends one gradient row per key (`grads`, keys.size() * dim floats, in
  // key order) for `step` to every shard (sync needs the empty ones too).
  absl::Status Push(int t, int64_t step, const std::vector<uint64_t>& keys, const float* grads);

  // Payload bytes sent and received so far, as they travelled.
  int64_t bytes_sent() const { return bytes_sent_; }
  int64_t bytes_received() const { return bytes_received_; }

 private:
  struct Table {
    EmbeddingTableConfig config;
    WireDType wire_dtype = DT_FLOAT32;
  };
  // One shard's share of a request: positions into the caller's keys.
  struct ShardShare {
    std::vector<uint64_t> keys;
    std::vector<int32_t> positions;
  };

  EmbeddingClient(int worker_index, absl::Duration rpc_timeout) : worker_(worker_index), rpc_timeout_(rpc_timeout) {}
  // `keys` split by the shard that owns each.
  std::vector<ShardShare> SplitByShard(const std::vector<uint64_t>& keys) const;
  // Sends one request per shard (requests[s] to shard s; none: none) and
  // waits for all; the first error names its shard.
  absl::Status FanOut(std::string_view method, std::vector<std::optional<OutgoingFrame>> requests,
                      std::vector<IncomingFrame>* responses, absl::Duration timeout);

  const int worker_;
  const absl::Duration rpc_timeout_;
  std::vector<Table> tables_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::string> addresses_;
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace pstrain
