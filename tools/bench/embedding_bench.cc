#include "tools/bench/embedding_bench.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/compression/compression.h"
#include "common/data/criteo/synthetic_ctr.h"
#include "common/embedding_keys.h"
#include "common/status_macros.h"
#include "common/transport/transport.h"
#include "ps/embedding/embedding_table.h"
#include "ps/ps_runner.h"
#include "tools/bench/port_reservation.h"
#include "worker/embedding_client.h"
#include "worker/ps_client.h"

namespace pstrain::bench {
namespace {

// --wire_dtype's name as the config's enum (checked by ValidateOptions: fp32
// otherwise).
EmbeddingTableConfig::WireDtype WireDtypeOf(const std::string& name) {
  EmbeddingTableConfig::WireDtype dtype = EmbeddingTableConfig::fp32;
  EmbeddingTableConfig::WireDtype_Parse(name, &dtype);
  return dtype;
}

constexpr char kTable[] = "bench";
constexpr float kLearningRate = 0.01f;

// Draws the ids of one batch: feature f's rank r becomes the id
// MixBits(f, r), so features do not share rows.
class BatchIds {
 public:
  BatchIds(const EmbeddingBenchOptions& o, uint64_t stream)
      : options_(o), zipf_(static_cast<uint64_t>(o.cardinality), o.zipf), rng_(o.seed * 1000003 + stream) {}
  std::vector<uint64_t> Next() {
    std::vector<uint64_t> ids;
    ids.reserve(static_cast<size_t>(options_.batch_size) * options_.features);
    for (int e = 0; e < options_.batch_size; ++e) {
      for (int f = 0; f < options_.features; ++f) {
        ids.push_back(MixBits((static_cast<uint64_t>(f) << 48) ^ zipf_.Sample(rng_)));
      }
    }
    return ids;
  }

 private:
  const EmbeddingBenchOptions& options_;
  criteo::ZipfSampler zipf_;
  criteo::SplitMix64 rng_;
};

// Seconds `fn` takes over every round of `rounds`.
template <typename Fn>
double Timed(const std::vector<std::vector<uint64_t>>& rounds, Fn fn) {
  const absl::Time start = absl::Now();
  for (const std::vector<uint64_t>& keys : rounds) fn(keys);
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// The shard's table against a plain hash map, over the same rounds of keys.
absl::Status MeasureInProcess(const EmbeddingBenchOptions& o, EmbeddingBenchResult* r) {
  std::vector<std::vector<uint64_t>> rounds;
  BatchIds draw(o, /*stream=*/999);
  const EmbeddingTableConfig dynamic;  // a row per id, as the cluster's table
  int64_t rows = 0;
  // Rounds for about `seconds` of the table's reads, judged from the first.
  const absl::Time until = absl::Now() + absl::Seconds(o.seconds / 4);
  while (rounds.size() < 4 || absl::Now() < until) {
    rounds.push_back(DeduplicateIds(dynamic, draw.Next()).keys);
    rows += static_cast<int64_t>(rounds.back().size());
  }
  EmbeddingTableOptions t;
  t.name = kTable;
  t.dim = o.dim;
  t.seed = o.seed;
  t.optimizer.set_name(o.optimizer);
  t.optimizer.set_learning_rate(kLearningRate);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingTable> table, EmbeddingTable::Create(t));
  std::vector<float> out, grads;
  absl::Status status;
  const double read_s = Timed(rounds, [&](const std::vector<uint64_t>& keys) {
    out.resize(keys.size() * o.dim);
    status.Update(table->Read(keys, out.data()));
  });
  const double apply_s = Timed(rounds, [&](const std::vector<uint64_t>& keys) {
    grads.assign(keys.size() * o.dim, 1e-3f);
    status.Update(table->Apply(keys, grads.data(), 1.0f, 0));
  });
  PSTRAIN_RETURN_IF_ERROR(status);
  absl::flat_hash_map<uint64_t, std::vector<float>> map;
  const uint64_t digest = EmbeddingTableDigest(kTable);
  const double map_read_s = Timed(rounds, [&](const std::vector<uint64_t>& keys) {
    out.resize(keys.size() * o.dim);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, inserted] = map.try_emplace(keys[i]);
      if (inserted) {
        it->second.resize(o.dim);
        InitialEmbeddingRow(o.seed, digest, keys[i], 0.01f, absl::MakeSpan(it->second));
      }
      std::copy(it->second.begin(), it->second.end(), out.begin() + i * o.dim);
    }
  });
  const double map_apply_s = Timed(rounds, [&](const std::vector<uint64_t>& keys) {
    for (uint64_t key : keys) {
      for (float& v : map.find(key)->second) v -= kLearningRate * 1e-3f;
    }
  });
  r->local_rounds = static_cast<int64_t>(rounds.size());
  r->table_lookups_per_sec = rows / read_s;
  r->table_updates_per_sec = rows / apply_s;
  r->map_lookups_per_sec = rows / map_read_s;
  r->map_updates_per_sec = rows / map_apply_s;
  r->lookup_ratio = r->table_lookups_per_sec / r->map_lookups_per_sec;
  r->update_ratio = r->table_updates_per_sec / r->map_updates_per_sec;
  return absl::OkStatus();
}

ExperimentConfig ClusterConfig(const EmbeddingBenchOptions& o, const std::vector<std::string>& ps_hosts) {
  ExperimentConfig config;
  config.set_name("embedding_bench");
  for (const std::string& host : ps_hosts) config.mutable_cluster()->add_ps_hosts(host);
  for (int w = 0; w < o.workers; ++w) config.mutable_cluster()->add_worker_hosts(absl::StrCat("127.0.0.1:", 1 + w));
  config.set_consistency("async");
  config.set_transport(o.transport);
  config.mutable_optimizer()->set_name(o.optimizer);
  config.mutable_optimizer()->set_learning_rate(kLearningRate);
  config.mutable_train()->set_init_seed(o.seed);
  EmbeddingTableConfig* table = config.mutable_model()->add_tables();
  table->set_name(kTable);
  table->set_dim(o.dim);
  table->set_wire_dtype(WireDtypeOf(o.wire_dtype));
  TimeoutConfig* t = config.mutable_timeouts();
  t->set_rpc_seconds(600);
  t->set_worker_lost_seconds(1e7);
  return config;
}

// One worker's rounds; counts what it moved.
struct WorkerTally {
  int64_t timed_rounds = 0;
  int64_t ids = 0;
  int64_t pulled = 0, pushed = 0;              // keys, all rounds
  int64_t timed_pulled = 0, timed_pushed = 0;  // keys, timed rounds
  double seconds = 0;
  absl::Status status;
};

void RunWorkerRounds(const EmbeddingBenchOptions& o, EmbeddingClient& client, int w, WorkerTally* tally) {
  BatchIds draw(o, static_cast<uint64_t>(w));
  std::vector<float> rows, grads;
  absl::Time start;
  for (int64_t round = 0;; ++round) {
    if (round == o.warmup_rounds) start = absl::Now();
    const bool timed = round >= o.warmup_rounds;
    if (timed && absl::Now() - start >= absl::Seconds(o.seconds)) break;
    const std::vector<uint64_t> ids = draw.Next();
    const SparseKeys keys = client.Deduplicate(0, ids);
    rows.resize(keys.keys.size() * o.dim);
    tally->status = client.Pull(0, keys.keys, 0, absl::Seconds(60), rows.data());
    if (!tally->status.ok()) return;
    grads.assign(rows.size(), 1e-3f);
    tally->status = client.Push(0, round, keys.keys, grads.data());
    if (!tally->status.ok()) return;
    const int64_t n = static_cast<int64_t>(keys.keys.size());
    tally->pulled += n;
    tally->pushed += n;
    if (!timed) continue;
    ++tally->timed_rounds;
    tally->ids += static_cast<int64_t>(ids.size());
    tally->timed_pulled += n;
    tally->timed_pushed += n;
  }
  tally->seconds = absl::ToDoubleSeconds(absl::Now() - start);
}

}  // namespace

absl::Status ValidateEmbeddingBenchOptions(const EmbeddingBenchOptions& o) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  if (o.servers < 1 || o.workers < 1) return bad("--servers and --workers must be >= 1");
  if (o.batch_size < 1 || o.features < 1) return bad("--batch_size and --features must be >= 1");
  if (o.dim < 1 || o.dim > 4096) return bad(absl::StrCat("--dim must be in [1, 4096], got ", o.dim));
  if (o.cardinality < 1) return bad("--cardinality must be >= 1");
  if (!(o.zipf > 0) || !std::isfinite(o.zipf)) return bad("--zipf must be > 0");
  if (!(o.seconds > 0)) return bad("--seconds must be > 0");
  if (o.warmup_rounds < 0) return bad("--warmup_rounds must be >= 0");
  EmbeddingTableConfig::WireDtype dtype;
  if (!EmbeddingTableConfig::WireDtype_Parse(o.wire_dtype, &dtype)) {
    return bad(absl::StrCat("--wire_dtype must be fp32, fp16 or bf16, got '", o.wire_dtype, "'"));
  }
  if (!TransportRegistry().Find(o.transport).ok()) {
    return bad(absl::StrCat("--transport '", o.transport, "' is not a transport of this build"));
  }
  return absl::OkStatus();
}

namespace {

// The shards as threads of this process, the workers' transports and
// clients; everything joined and released by the destructor (the workers'
// clients before the transports they came from).
class BenchCluster {
 public:
  explicit BenchCluster(const EmbeddingBenchOptions& o) : options_(o) {}
  ~BenchCluster() {
    cancel_ = true;
    for (std::thread& t : shard_threads_) t.join();
  }

  absl::Status Start() {
    std::vector<std::string> hosts;
    std::vector<std::unique_ptr<PortReservation>> reservations;
    for (int s = 0; s < options_.servers; ++s) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PortReservation> r, PortReservation::Take());
      hosts.push_back(absl::StrCat("127.0.0.1:", r->port()));
      reservations.push_back(std::move(r));
    }
    config_ = ClusterConfig(options_, hosts);
    stats_.resize(options_.servers);
    shard_status_.resize(options_.servers);
    for (int s = 0; s < options_.servers; ++s) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, CreateTransport(options_.transport, {}));
      transports_.push_back(std::move(t));
    }
    for (int s = 0; s < options_.servers; ++s) {
      shard_threads_.emplace_back([this, s] {
        PsRunOptions run;
        run.listen_address = config_.cluster().ps_hosts(s);
        run.cancel = &cancel_;
        run.final_stats = &stats_[s];
        shard_status_[s] = RunParameterServer(config_, s, transports_[s].get(), run);
      });
    }
    for (int w = 0; w < options_.workers; ++w) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Transport> t, CreateTransport(options_.transport, {}));
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsClient> ps, PsClient::Create(config_, w, t.get(), &no_variables_, {}));
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingClient> e, EmbeddingClient::Create(config_, w, t.get()));
      transports_.push_back(std::move(t));
      ps_.push_back(std::move(ps));
      tables_.push_back(std::move(e));
    }
    // The chief's Init (it waits for every shard) creates the tables.
    return ps_[0]->Init(/*total_steps=*/0);
  }

  // Every worker's rounds, on threads of their own.
  std::vector<WorkerTally> Run() {
    std::vector<WorkerTally> tallies(options_.workers);
    std::vector<std::thread> threads;
    for (int w = 0; w < options_.workers; ++w) {
      threads.emplace_back([this, w, &tallies] { RunWorkerRounds(options_, *tables_[w], w, &tallies[w]); });
    }
    for (std::thread& t : threads) t.join();
    return tallies;
  }

  // Every shard's table, then every worker says Done and the shards end.
  absl::StatusOr<std::vector<TableStats>> Finish() {
    PSTRAIN_ASSIGN_OR_RETURN(std::vector<StatsResponse> stats, ps_[0]->Stats());
    std::vector<TableStats> tables;
    for (const StatsResponse& s : stats) {
      if (s.tables_size() != 1) return absl::InternalError("a shard reported no embedding table");
      tables.push_back(s.tables(0));
    }
    for (int w = 0; w < options_.workers; ++w) {
      WorkerReport report;
      report.set_worker(w);
      PSTRAIN_RETURN_IF_ERROR(ps_[w]->Done(report));
    }
    for (std::thread& t : shard_threads_) t.join();
    shard_threads_.clear();
    for (int s = 0; s < options_.servers; ++s) {
      if (!shard_status_[s].ok())
        return absl::Status(shard_status_[s].code(), absl::StrCat("PS shard ", s, ": ", shard_status_[s].message()));
    }
    return tables;
  }

 private:
  const EmbeddingBenchOptions& options_;
  ExperimentConfig config_;
  std::atomic<bool> cancel_{false};
  std::vector<StatsResponse> stats_;
  std::vector<absl::Status> shard_status_;
  std::vector<Variable> no_variables_;
  // Shards' transports, then workers'.
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<PsClient>> ps_;
  std::vector<std::unique_ptr<EmbeddingClient>> tables_;
  std::vector<std::thread> shard_threads_;
};

}  // namespace

absl::StatusOr<EmbeddingBenchResult> RunEmbeddingBench(const EmbeddingBenchOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(ValidateEmbeddingBenchOptions(options));
  EmbeddingBenchResult r;
  PSTRAIN_RETURN_IF_ERROR(MeasureInProcess(options, &r));
  BenchCluster cluster(options);
  PSTRAIN_RETURN_IF_ERROR(cluster.Start());
  double slowest = 0;
  int64_t ids = 0, timed_pulled = 0, timed_pushed = 0;
  for (const WorkerTally& t : cluster.Run()) {
    PSTRAIN_RETURN_IF_ERROR(t.status);
    r.rounds += t.timed_rounds;
    ids += t.ids;
    timed_pulled += t.timed_pulled;
    timed_pushed += t.timed_pushed;
    r.client_pulled_rows += t.pulled;
    r.client_pushed_rows += t.pushed;
    slowest = std::max(slowest, t.seconds);
  }
  PSTRAIN_ASSIGN_OR_RETURN(r.shards, cluster.Finish());
  EmbeddingTableConfig table;
  table.set_wire_dtype(WireDtypeOf(options.wire_dtype));
  const double row_bits = 8.0 * options.dim * WireDTypeSize(EmbeddingWireDType(table));
  r.unique_fraction = ids > 0 ? static_cast<double>(timed_pulled) / ids : 0;
  r.pulled_rows_per_sec = timed_pulled / slowest;
  r.pushed_rows_per_sec = timed_pushed / slowest;
  r.sparse_gbps = (timed_pulled + timed_pushed) * row_bits / slowest / 1e9;
  return r;
}

namespace {

std::string Num(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

}  // namespace

std::string FormatEmbeddingBenchTable(const EmbeddingBenchOptions& o, const EmbeddingBenchResult& r) {
  std::string out = absl::StrFormat(
      "embedding bench: servers=%d workers=%d batch=%d features=%d dim=%d cardinality=%d zipf=%g optimizer=%s "
      "transport=%s wire=%s\n",
      o.servers, o.workers, o.batch_size, o.features, o.dim, o.cardinality, o.zipf, o.optimizer, o.transport,
      o.wire_dtype);
  absl::StrAppendFormat(&out, "in process (%d rounds)        rows/s      hash map rows/s   ratio\n", r.local_rounds);
  absl::StrAppendFormat(&out, "  lookup                   %12.4g  %12.4g      %.3f\n", r.table_lookups_per_sec,
                        r.map_lookups_per_sec, r.lookup_ratio);
  absl::StrAppendFormat(&out, "  update                   %12.4g  %12.4g      %.3f\n", r.table_updates_per_sec,
                        r.map_updates_per_sec, r.update_ratio);
  absl::StrAppendFormat(&out, "over the PS (%d rounds, %.3f of ids unique)\n", r.rounds, r.unique_fraction);
  absl::StrAppendFormat(&out, "  pulled rows/s %.4g (%.4g per shard), updated rows/s %.4g (%.4g per shard)\n",
                        r.pulled_rows_per_sec, r.pulled_rows_per_sec / o.servers, r.pushed_rows_per_sec,
                        r.pushed_rows_per_sec / o.servers);
  absl::StrAppendFormat(&out, "  rows on the wire, both ways: %.3f Gbit/s\n", r.sparse_gbps);
  for (size_t s = 0; s < r.shards.size(); ++s) {
    const TableStats& t = r.shards[s];
    absl::StrAppendFormat(&out, "  shard %d: rows=%d bytes_per_row=%d bytes=%d pulled=%d pushed=%d\n", s, t.rows(),
                          t.bytes_per_row(), t.bytes(), t.pulled_rows(), t.pushed_rows());
  }
  return out;
}

std::string FormatEmbeddingBenchJson(const EmbeddingBenchOptions& o, const EmbeddingBenchResult& r) {
  int64_t rows = 0, bytes = 0;
  for (const TableStats& t : r.shards) {
    rows += t.rows();
    bytes += t.bytes();
  }
  return absl::StrCat(
      "{\"table_lookups_per_sec\":", Num(r.table_lookups_per_sec),
      ",\"map_lookups_per_sec\":", Num(r.map_lookups_per_sec), ",\"lookup_ratio\":", Num(r.lookup_ratio),
      ",\"table_updates_per_sec\":", Num(r.table_updates_per_sec),
      ",\"map_updates_per_sec\":", Num(r.map_updates_per_sec), ",\"update_ratio\":", Num(r.update_ratio),
      ",\"pulled_rows_per_sec\":", Num(r.pulled_rows_per_sec), ",\"pushed_rows_per_sec\":", Num(r.pushed_rows_per_sec),
      ",\"sparse_gbps\":", Num(r.sparse_gbps), ",\"unique_fraction\":", Num(r.unique_fraction),
      ",\"rounds\":", r.rounds, ",\"rows\":", rows, ",\"bytes\":", bytes, ",\"servers\":", o.servers,
      ",\"workers\":", o.workers, ",\"batch_size\":", o.batch_size, ",\"features\":", o.features, ",\"dim\":", o.dim,
      ",\"cardinality\":", o.cardinality, ",\"zipf\":", Num(o.zipf), ",\"transport\":\"", o.transport,
      "\",\"optimizer\":\"", o.optimizer, "\",\"wire_dtype\":\"", o.wire_dtype, "\"}");
}

}  // namespace pstrain::bench
