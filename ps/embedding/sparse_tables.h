// SparseTables: a PS shard's parts of the run's embedding tables and the
// rules of their sparse pulls and pushes (SparsePull, SparsePush in
// proto/ps.proto).
//
// Keys on the wire are row keys (common/embedding_keys.h), each one this
// shard owns. A pull answers the rows of its keys, in its order, in the
// table's wire dtype; a pull asking for a version the table has not reached
// is parked until it has, or until its deadline.
//
// Async: a push's rows are applied on arrival (one update, the version goes
// up by one). Sync: every worker pushes every step (no keys when its batch
// touched none of this shard's rows); once the step's last push is in, one
// update applies, per key, the sum of the workers' rows (added in worker
// order, so the result does not depend on arrival order) scaled by
// 1 / num_workers -- with each worker's gradient the mean over its batch,
// that is one device's mean over the whole batch. Steps apply in order; a
// push for a step already applied, a second push by a worker for a step, a
// repeated key, a key another shard owns, or a count that does not match
// the payload is INVALID_ARGUMENT and changes nothing.
//
// Thread-safe: one mutex serialises the tables (requests from transport
// threads); a responder is never called with it held.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/shard_checkpoint_file.h"
#include "common/transport/transport.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "ps/embedding/embedding_table.h"

namespace pstrain {

struct SparseTablesOptions {
  int shard_index = 0;
  int num_shards = 1;
  int num_workers = 1;
  // Per-step aggregation over every worker (sync); otherwise applied on
  // arrival.
  bool sync = false;
  std::vector<EmbeddingTableConfig> tables;
  // A table without an optimizer of its own uses this one.
  OptimizerConfig default_optimizer;
  uint64_t seed = 0;        // train.init_seed
  int64_t total_steps = 0;  // global steps of the run (schedules); 0: unknown
  // A pull without a timeout of its own waits this long.
  absl::Duration default_timeout = absl::Seconds(60);
};

class SparseTables {
 public:
  // InvalidArgument or NotFound naming the table whose config is bad.
  static absl::StatusOr<std::unique_ptr<SparseTables>> Create(const SparseTablesOptions& options);

  // Answers through `respond` now, or once the table reaches
  // request.min_version (DEADLINE_EXCEEDED saying so at the deadline).
  void Pull(const SparsePullRequest& request, IncomingFrame& payload, Responder respond) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<SparsePushResponse> Push(const SparsePushRequest& request, IncomingFrame& payload)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Answers the parked pulls whose deadline has come by `now`.
  void ExpirePulls(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers every parked pull with `status`.
  void CancelPulls(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  // Each table's part on this shard, in config order.
  std::vector<TableStats> Stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // A checkpoint's view of every table (ps/shard/shard_checkpoint.h writes it).
  struct Snapshot {
    ShardCheckpointHeader::Table header;
    EmbeddingTable::Rows rows;
    std::vector<uint64_t> live_keys;  // an increment of a max_rows table: every key held
  };
  struct Snapshots {
    int64_t since_step = 0;        // > 0: the rows changed since this shard's checkpoint of that step
    std::vector<Snapshot> tables;  // in config order
  };
  // Sync: waits until every table has applied `step` steps -- a worker's
  // dense push of a step can land before its sparse push of that step, so
  // a checkpoint of `step` waits for the tables too. DEADLINE_EXCEEDED
  // naming the table behind at `deadline`; FAILED_PRECONDITION at once
  // when a table is more than one step behind `step` (no sync run gets
  // there: each step's pulls waited for the step before).
  absl::Status AwaitSteps(int64_t step, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Every table's rows, copied at one instant, recorded as this shard's
  // checkpoint of `step`. With `since_step` > 0, when this shard recorded
  // that step (it wrote or restored the checkpoint of that step), only the
  // rows changed since then: an increment; otherwise every row.
  Snapshots TakeSnapshots(int64_t step, int64_t since_step) ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces every table with the rows of `chain` (one file with every row,
  // then increments in order, common/table_chain.h), recorded as the checkpoint of
  // `step`. FAILED_PRECONDITION, changing nothing, when the files' tables
  // are not this run's (names, dims, optimizer slots) or their rows are not
  // this shard's; sync steps in progress are dropped and parked pulls
  // answered ABORTED.
  absl::Status Restore(const std::vector<DecodedShardCheckpoint>& chain, int64_t step) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One worker's rows of a sync step.
  struct WorkerRows {
    std::vector<uint64_t> keys;
    std::vector<float> rows;
  };
  // A sync step's pushes so far, by worker.
  struct PendingStep {
    std::vector<std::unique_ptr<WorkerRows>> by_worker;
    int pushed = 0;
  };
  struct ParkedPull {
    SparsePullRequest request;
    std::vector<uint64_t> keys;
    Responder respond;
    absl::Time deadline;
  };
  struct Table {
    EmbeddingTableConfig config;
    WireDType dtype = DT_FLOAT32;
    std::unique_ptr<EmbeddingTable> rows;
    std::map<int64_t, PendingStep> pending;  // sync, by step
  };
  // An answer to send once mu_ is released.
  struct Answer {
    Responder respond;
    absl::Status status;
    OutgoingFrame frame;
  };

  explicit SparseTables(const SparseTablesOptions& options) : options_(options) {}
  // The table `name`; INVALID_ARGUMENT naming it when there is none.
  absl::StatusOr<Table*> Find(const std::string& name, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads `n` keys from `payload`, each one this shard's.
  absl::StatusOr<std::vector<uint64_t>> ReadKeys(IncomingFrame& payload, int64_t n, const char* what) const;
  // The pull's answer: the rows in the table's wire dtype.
  absl::StatusOr<OutgoingFrame> ServePull(Table& table, const std::vector<uint64_t>& keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sync: records `worker`'s rows of `step`, then applies every complete
  // step in order; the rows applied by this call.
  absl::StatusOr<int64_t> AddSyncRows(Table& table, int worker, int64_t step, std::unique_ptr<WorkerRows> rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one complete step's rows (summed in worker order).
  absl::StatusOr<int64_t> ApplyStep(Table& table, const PendingStep& step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The global step of the table's next update (schedules).
  int64_t GlobalStep(const Table& table) const;
  // Takes out the parked pulls of `table` that can be answered now.
  std::vector<Answer> RetryPulls() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SparseTablesOptions options_;
  mutable absl::Mutex mu_;
  std::vector<Table> tables_ ABSL_GUARDED_BY(mu_);
  std::vector<ParkedPull> parked_ ABSL_GUARDED_BY(mu_);
  // The checkpoints an increment can build on: step -> each table's version
  // then (only those not older than the last one asked for).
  std::map<int64_t, std::vector<int64_t>> checkpoints_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
