#include "ps/embedding/sparse_tables.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/compression/compression.h"
#include "common/embedding_keys.h"
#include "common/status_macros.h"
#include "common/table_chain.h"

namespace pstrain {
namespace {

// Payload bytes of n rows of `dim` values in `dtype`.
int64_t RowBytes(int64_t n, int dim, WireDType dtype) { return n * dim * static_cast<int64_t>(WireDTypeSize(dtype)); }

}  // namespace

absl::StatusOr<std::unique_ptr<SparseTables>> SparseTables::Create(const SparseTablesOptions& options) {
  std::unique_ptr<SparseTables> tables(new SparseTables(options));
  absl::MutexLock lock(&tables->mu_);
  absl::flat_hash_set<std::string> names;
  for (const EmbeddingTableConfig& config : options.tables) {
    if (!names.insert(config.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat("table '", config.name(), "' is named twice"));
    }
    Table table;
    table.config = config;
    table.dtype = EmbeddingWireDType(config);
    EmbeddingTableOptions o{.name = config.name(),
                            .dim = config.dim(),
                            .init_scale = config.init_scale(),
                            .seed = options.seed,
                            .optimizer = config.has_optimizer() ? config.optimizer() : options.default_optimizer,
                            .total_steps = options.total_steps};
    o.eviction =
        config.eviction() == EmbeddingTableConfig::lfu ? Eviction::kLeastOftenUsed : Eviction::kLeastRecentlyUsed;
    // The table's limit, split evenly over the shards (rounded up).
    if (config.max_rows() > 0) o.max_rows = (config.max_rows() + options.num_shards - 1) / options.num_shards;
    PSTRAIN_ASSIGN_OR_RETURN(table.rows, EmbeddingTable::Create(o));
    tables->tables_.push_back(std::move(table));
  }
  return tables;
}

absl::StatusOr<SparseTables::Table*> SparseTables::Find(const std::string& name, const char* what) {
  for (Table& table : tables_) {
    if (table.config.name() == name) return &table;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": no embedding table '", name, "' on shard ", options_.shard_index));
}

absl::StatusOr<std::vector<uint64_t>> SparseTables::ReadKeys(IncomingFrame& payload, int64_t n,
                                                             const char* what) const {
  if (n < 0 || static_cast<uint64_t>(n) > payload.remaining() / sizeof(uint64_t)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": num_ids ", n, " but ", payload.remaining(), " payload bytes (8 per id)"));
  }
  std::vector<uint64_t> keys(n);
  PSTRAIN_RETURN_IF_ERROR(payload.Read(keys.data(), keys.size() * sizeof(uint64_t)));
  for (uint64_t key : keys) {
    const int owner = EmbeddingKeyShard(key, options_.num_shards);
    if (owner != options_.shard_index) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": id ", key, " belongs to shard ", owner, ", not shard ", options_.shard_index));
    }
  }
  return keys;
}

void SparseTables::Pull(const SparsePullRequest& request, IncomingFrame& payload, Responder respond) {
  absl::StatusOr<OutgoingFrame> answer;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Table*> table = Find(request.table(), "sparse pull");
    absl::StatusOr<std::vector<uint64_t>> keys =
        table.ok() ? ReadKeys(payload, request.num_ids(), "sparse pull") : table.status();
    if (keys.ok() && payload.remaining() != 0) {
      keys = absl::InvalidArgumentError(absl::StrCat("sparse pull: ", payload.remaining(), " bytes after the ids"));
    }
    if (keys.ok() && (*table)->rows->version() < request.min_version()) {
      const absl::Duration timeout =
          request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms()) : options_.default_timeout;
      parked_.push_back(ParkedPull{request, *std::move(keys), std::move(respond), absl::Now() + timeout});
      return;
    }
    answer = keys.ok() ? ServePull(**table, *keys) : keys.status();
  }
  if (answer.ok()) {
    respond(absl::OkStatus(), *std::move(answer));
  } else {
    respond(answer.status(), {});
  }
}

absl::StatusOr<OutgoingFrame> SparseTables::ServePull(Table& table, const std::vector<uint64_t>& keys) {
  const int dim = table.rows->dim();
  std::vector<float> rows(keys.size() * dim);
  PSTRAIN_RETURN_IF_ERROR(table.rows->Read(keys, rows.data()));
  SparsePullResponse header;
  header.set_dim(dim);
  header.set_num_ids(static_cast<int64_t>(keys.size()));
  header.set_dtype(table.dtype);
  header.set_version(table.rows->version());
  OutgoingFrame frame = OutgoingFrame::FromHeader(header);
  auto bytes = std::make_shared<std::vector<char>>(RowBytes(keys.size(), dim, table.dtype));
  EncodeFloats(table.dtype, rows.data(), rows.size(), bytes->data());
  frame.chunks.push_back(ConstChunk{bytes->data(), bytes->size(), bytes});
  return frame;
}

absl::StatusOr<SparsePushResponse> SparseTables::Push(const SparsePushRequest& request, IncomingFrame& payload) {
  std::vector<Answer> answers;
  SparsePushResponse response;
  {
    absl::MutexLock lock(&mu_);
    PSTRAIN_ASSIGN_OR_RETURN(Table * table, Find(request.table(), "sparse push"));
    const int dim = table->rows->dim();
    if (request.dim() != dim || request.dtype() != table->dtype) {
      return absl::InvalidArgumentError(absl::StrCat("sparse push to '", request.table(), "': dim ", request.dim(),
                                                     " dtype ", request.dtype(), ", the table has dim ", dim, " dtype ",
                                                     table->dtype));
    }
    if (request.worker() < 0 || request.worker() >= options_.num_workers) {
      return absl::InvalidArgumentError(absl::StrCat("sparse push: worker ", request.worker(), " out of range"));
    }
    auto rows = std::make_unique<WorkerRows>();
    PSTRAIN_ASSIGN_OR_RETURN(rows->keys, ReadKeys(payload, request.num_ids(), "sparse push"));
    if (payload.remaining() != static_cast<size_t>(RowBytes(request.num_ids(), dim, table->dtype))) {
      return absl::InvalidArgumentError(absl::StrCat("sparse push: ", payload.remaining(), " bytes of rows for ",
                                                     request.num_ids(), " ids of dim ", dim));
    }
    if (absl::flat_hash_set<uint64_t>(rows->keys.begin(), rows->keys.end()).size() != rows->keys.size()) {
      return absl::InvalidArgumentError(absl::StrCat("sparse push to '", request.table(), "': an id is repeated"));
    }
    std::vector<char> wire(payload.remaining());
    PSTRAIN_RETURN_IF_ERROR(payload.Read(wire.data(), wire.size()));
    rows->rows.resize(rows->keys.size() * dim);
    DecodeFloats(table->dtype, wire.data(), rows->rows.size(), rows->rows.data());
    int64_t applied = 0;
    if (options_.sync) {
      PSTRAIN_ASSIGN_OR_RETURN(applied, AddSyncRows(*table, request.worker(), request.step(), std::move(rows)));
    } else {
      PSTRAIN_RETURN_IF_ERROR(table->rows->Apply(rows->keys, rows->rows.data(), 1.0f, GlobalStep(*table)));
      applied = static_cast<int64_t>(rows->keys.size());
    }
    response.set_applied_rows(applied);
    response.set_version(table->rows->version());
    answers = RetryPulls();
  }
  for (Answer& a : answers) a.respond(a.status, std::move(a.frame));
  return response;
}

absl::StatusOr<int64_t> SparseTables::AddSyncRows(Table& table, int worker, int64_t step,
                                                  std::unique_ptr<WorkerRows> rows) {
  if (step < table.rows->version()) {
    return absl::InvalidArgumentError(absl::StrCat("sparse push to '", table.config.name(), "' by worker ", worker,
                                                   " for step ", step, ": the table has applied ",
                                                   table.rows->version(), " steps"));
  }
  PendingStep& pending = table.pending[step];
  if (pending.by_worker.empty()) pending.by_worker.resize(options_.num_workers);
  if (pending.by_worker[worker] != nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse push to '", table.config.name(), "': worker ", worker, " pushed step ", step, " twice"));
  }
  pending.by_worker[worker] = std::move(rows);
  ++pending.pushed;
  int64_t applied = 0;
  while (!table.pending.empty() && table.pending.begin()->first == table.rows->version() &&
         table.pending.begin()->second.pushed == options_.num_workers) {
    PSTRAIN_ASSIGN_OR_RETURN(const int64_t n, ApplyStep(table, table.pending.begin()->second));
    applied += n;
    table.pending.erase(table.pending.begin());
  }
  return applied;
}

absl::StatusOr<int64_t> SparseTables::ApplyStep(Table& table, const PendingStep& step) {
  const int dim = table.rows->dim();
  // Every worker's rows, in worker order, then sorted by key (stably: a
  // key's rows stay in worker order), summed key by key into one row each.
  std::vector<std::pair<uint64_t, const float*>> rows;
  for (const std::unique_ptr<WorkerRows>& w : step.by_worker) {
    for (size_t i = 0; i < w->keys.size(); ++i) rows.emplace_back(w->keys[i], w->rows.data() + i * dim);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  for (const auto& [key, row] : rows) {
    if (keys.empty() || keys.back() != key) {
      keys.push_back(key);
      grads.resize(grads.size() + dim, 0.0f);
    }
    float* sum = grads.data() + grads.size() - dim;
    for (int d = 0; d < dim; ++d) sum[d] += row[d];
  }
  PSTRAIN_RETURN_IF_ERROR(
      table.rows->Apply(keys, grads.data(), 1.0f / static_cast<float>(options_.num_workers), GlobalStep(table)));
  return static_cast<int64_t>(keys.size());
}

int64_t SparseTables::GlobalStep(const Table& table) const {
  const int64_t version = table.rows->version();
  return options_.sync ? version : version / options_.num_workers;
}

std::vector<SparseTables::Answer> SparseTables::RetryPulls() {
  std::vector<Answer> answers;
  for (auto it = parked_.begin(); it != parked_.end();) {
    // A parked pull's table exists: Pull found it before parking.
    Table* table = *Find(it->request.table(), "sparse pull");
    if (table->rows->version() < it->request.min_version()) {
      ++it;
      continue;
    }
    absl::StatusOr<OutgoingFrame> frame = ServePull(*table, it->keys);
    answers.push_back(Answer{std::move(it->respond), frame.status(), frame.ok() ? *std::move(frame) : OutgoingFrame()});
    it = parked_.erase(it);
  }
  return answers;
}

void SparseTables::ExpirePulls(absl::Time now) {
  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      const int64_t version = (*Find(it->request.table(), "sparse pull"))->rows->version();
      answers.push_back(Answer{
          std::move(it->respond),
          absl::DeadlineExceededError(absl::StrCat(
              "shard ", options_.shard_index, ": sparse pull of '", it->request.table(), "' by worker ",
              it->request.worker(), " for version >= ", it->request.min_version(), " timed out at version ", version)),
          {}});
      it = parked_.erase(it);
    }
  }
  for (Answer& a : answers) a.respond(a.status, std::move(a.frame));
}

void SparseTables::CancelPulls(const absl::Status& status) {
  std::vector<ParkedPull> parked;
  {
    absl::MutexLock lock(&mu_);
    parked.swap(parked_);
  }
  for (ParkedPull& p : parked) p.respond(status, {});
}

absl::Status SparseTables::AwaitSteps(int64_t step, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  // Every worker pulled its rows of step - 1 at version step - 1, so the
  // tables are never further behind than that: a request further ahead is
  // refused at once rather than held until its deadline.
  for (const Table& t : tables_) {
    if (t.rows->version() < step - 1) {
      return absl::FailedPreconditionError(absl::StrCat("table '", t.config.name(), "' has applied ", t.rows->version(),
                                                        " steps; a checkpoint of step ", step,
                                                        " may lead the tables by one step at most"));
    }
  }
  auto applied = [this, step]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(tables_.begin(), tables_.end(), [step](const Table& t) { return t.rows->version() >= step; });
  };
  if (mu_.AwaitWithDeadline(absl::Condition(&applied), deadline)) return absl::OkStatus();
  for (const Table& t : tables_) {
    if (t.rows->version() < step) {
      return absl::DeadlineExceededError(absl::StrCat("table '", t.config.name(), "' has applied ", t.rows->version(),
                                                      " steps, not yet ", step,
                                                      ": a worker's sparse push did not arrive in time"));
    }
  }
  return absl::OkStatus();
}

SparseTables::Snapshots SparseTables::TakeSnapshots(int64_t step, int64_t since_step) {
  absl::MutexLock lock(&mu_);
  Snapshots snapshots;
  const auto base = since_step > 0 ? checkpoints_.find(since_step) : checkpoints_.end();
  if (base != checkpoints_.end()) snapshots.since_step = since_step;
  std::vector<int64_t> versions;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const EmbeddingTable& table = *tables_[i].rows;
    Snapshot& s = snapshots.tables.emplace_back();
    if (base != checkpoints_.end()) {
      s.rows = table.Export(base->second[i]);
      if (tables_[i].config.max_rows() > 0) {
        s.live_keys = table.Keys();
        s.header.set_live_keys(static_cast<int64_t>(s.live_keys.size()));
      }
    } else {
      s.rows = table.Export();
    }
    s.header.set_name(tables_[i].config.name());
    s.header.set_dim(table.dim());
    s.header.set_slots(table.num_slots());
    s.header.set_rows(static_cast<int64_t>(s.rows.keys.size()));
    s.header.set_version(table.version());
    versions.push_back(table.version());
  }
  // The chief asks for increments on its last committed checkpoint only:
  // older records are no longer needed.
  checkpoints_.erase(checkpoints_.begin(), checkpoints_.lower_bound(since_step));
  checkpoints_[step] = std::move(versions);
  return snapshots;
}

absl::Status SparseTables::Restore(const std::vector<DecodedShardCheckpoint>& chain, int64_t step) {
  if (chain.empty()) return absl::InvalidArgumentError("restore: no checkpoint files");
  const ShardCheckpointView& view = chain.back().view;
  const std::string& path = chain.back().path;
  auto refuse = [&path](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint ", path, " does not fit this run: ", why));
  };
  std::vector<ParkedPull> parked;
  {
    absl::MutexLock lock(&mu_);
    if (view.tables.size() != tables_.size()) {
      return refuse(absl::StrCat(view.tables.size(), " embedding tables there, ", tables_.size(), " here"));
    }
    // Check every table, and read its rows, before replacing any.
    std::vector<std::tuple<Table*, EmbeddingTable::Rows, int64_t>> restored;
    for (const ShardCheckpointTable& t : view.tables) {
      absl::StatusOr<Table*> table = Find(t.name, "restore");
      if (!table.ok()) return refuse(absl::StrCat("table ", t.name, " is not in this run"));
      if (t.dim != (*table)->rows->dim() || t.slots != (*table)->rows->num_slots()) {
        return refuse(absl::StrCat("table ", t.name, " has dim ", t.dim, " and ", t.slots, " optimizer slots there, ",
                                   (*table)->rows->dim(), " and ", (*table)->rows->num_slots(), " here"));
      }
      const ShardCheckpointTable* last = nullptr;
      PSTRAIN_ASSIGN_OR_RETURN(EmbeddingTable::Rows rows, RowsAfterChain(chain, t.name, &last));
      for (uint64_t key : rows.keys) {
        if (EmbeddingKeyShard(key, options_.num_shards) != options_.shard_index) {
          return refuse(absl::StrCat("table ", t.name, " holds id ", key, " of shard ",
                                     EmbeddingKeyShard(key, options_.num_shards)));
        }
      }
      if (absl::Status s = (*table)->rows->CheckImport(rows); !s.ok()) return refuse(std::string(s.message()));
      restored.emplace_back(*table, std::move(rows), last->version);
    }
    std::vector<int64_t> versions;
    for (auto& [table, rows, version] : restored) {
      PSTRAIN_RETURN_IF_ERROR(table->rows->Import(rows, version));
      table->pending.clear();
    }
    for (const Table& table : tables_) versions.push_back(table.rows->version());
    checkpoints_.clear();
    checkpoints_[step] = std::move(versions);
    parked.swap(parked_);
  }
  for (ParkedPull& p : parked) p.respond(absl::AbortedError("sparse pull: the shard's tables were restored"), {});
  return absl::OkStatus();
}

std::vector<TableStats> SparseTables::Stats() const {
  absl::MutexLock lock(&mu_);
  std::vector<TableStats> stats;
  for (const Table& table : tables_) stats.push_back(table.rows->Stats());
  return stats;
}

}  // namespace pstrain
