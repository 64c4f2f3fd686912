// EmbeddingClient: a worker's sparse pulls and pushes of the run's embedding
// tables (model.tables) on the PS shards (ps/embedding/sparse_tables.h).
//
// A batch's feature ids are first deduplicated into row keys
// (common/embedding_keys.h); each key's row is pulled once and one gradient
// row per key is pushed. Every call fans out one request per table and
// shard, all in parallel, over channels of its own (the dense PsClient's
// traffic does not queue in front of it), and waits for all of them.
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

  // Pull and Push of several tables at once: every table's request to
  // every shard is in flight together (one round trip for the step rather
  // than one per table), and the call waits for all of them.
  struct TablePull {
    int table;
    const std::vector<uint64_t>* keys;
    float* rows;
  };
  absl::Status PullTables(const std::vector<TablePull>& pulls, int64_t min_version, absl::Duration timeout);
  struct TablePush {
    int table;
    const std::vector<uint64_t>* keys;
    const float* grads;
  };
  absl::Status PushTables(int64_t step, const std::vector<TablePush>& pushes);

  // The generation of the shards' state this worker works on (0: not
  // checked, the default): later requests carry it, and a shard restored
  // since answers them ABORTED. After a change (a recovery), the next calls
  // wait for each channel to connect, until their deadline, rather than fail
  // at once: the shards answered the restore over the dense client's
  // channels, so they are up, but these channels may still be backing off
  // from the shard that was lost.
  void set_generation(int64_t generation) {
    if (generation != generation_) reconnecting_ = true;
    generation_ = generation;
  }

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
  // One request to one shard.
  struct Call {
    int shard;
    OutgoingFrame request;
  };
  // Sends every call at once and waits for all; `responses` in call order.
  // The first error (in call order) names its shard.
  absl::Status FanOut(std::string_view method, std::vector<Call> calls, std::vector<IncomingFrame>* responses,
                      absl::Duration timeout);
  // A shard's SparsePull of `keys` of `table`.
  OutgoingFrame PullRequest(const Table& table, const std::vector<uint64_t>& keys, int64_t min_version,
                            absl::Duration timeout) const;
  // Writes the answer's rows to their positions in `rows`; DATA_LOSS when
  // it does not hold the share's rows.
  absl::Status ReadPullAnswer(const Table& table, const ShardShare& share, int shard, IncomingFrame& response,
                              float* rows);
  // A shard's SparsePush of its `share` of the gradient rows `grads`.
  OutgoingFrame PushRequest(const Table& table, int64_t step, const ShardShare& share, const float* grads) const;

  const int worker_;
  const absl::Duration rpc_timeout_;
  std::vector<Table> tables_;
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::string> addresses_;
  int64_t generation_ = 0;
  bool reconnecting_ = false;  // calls wait for their channels (set_generation)
  int64_t bytes_sent_ = 0;
  int64_t bytes_received_ = 0;
};

}  // namespace pstrain
