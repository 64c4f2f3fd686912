#include "ps/ps_runner.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/embedding_keys.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "common/summary/event_writer.h"
#include "glog/logging.h"
#include "ps/ps_metrics.h"
#include "ps/ps_service.h"
#include "ps/shard/shard.h"

namespace pstrain {
namespace {

// The shard's part of each embedding table, a line each.
void LogTables(const StatsResponse& stats) {
  for (const TableStats& t : stats.tables()) {
    LOG(INFO) << "shard " << stats.load().shard() << " table " << t.name() << ": rows=" << t.rows()
              << " bytes=" << t.bytes() << " bytes_per_row=" << t.bytes_per_row()
              << " evicted_rows=" << t.evicted_rows() << " pulled_rows=" << t.pulled_rows()
              << " pushed_rows=" << t.pushed_rows() << " version=" << t.version();
  }
}

void LogLoad(const ShardLoad& load) {
  LOG(INFO) << "shard " << load.shard() << " load: variables=" << load.variables()
            << " variable_bytes=" << load.variable_bytes() << " bytes_in=" << load.bytes_in()
            << " bytes_out=" << load.bytes_out() << " applied_updates=" << load.applied_updates()
            << " dropped_gradients=" << load.dropped_gradients() << " apply_seconds=" << load.apply_seconds()
            << " ssp_blocked_pulls=" << load.ssp_blocked_pulls() << " ssp_wait_seconds=" << load.ssp_wait_seconds();
}

PsShardOptions ShardOptions(const ExperimentConfig& config, int shard_index) {
  PsShardOptions shard_options;
  shard_options.shard_index = shard_index;
  shard_options.num_workers = config.cluster().worker_hosts_size();
  shard_options.consistency = config.consistency();
  shard_options.replicas_to_aggregate = config.replicas_to_aggregate();
  shard_options.staleness = config.staleness();
  shard_options.optimizer = config.optimizer();
  shard_options.timeouts = config.timeouts();
  const int min_workers = config.elastic().min_workers();
  shard_options.workers_join = min_workers > 0 && min_workers < shard_options.num_workers;
  shard_options.continue_without_lost = config.elastic().on_worker_lost() == ElasticConfig::continue_;
  shard_options.tables = RunEmbeddingTables(config);
  shard_options.num_shards = config.cluster().ps_hosts_size();
  shard_options.seed = config.train().init_seed();
  return shard_options;
}

// options.listen_address, or cluster.listen_address with the port of
// ps_hosts[shard_index].
absl::StatusOr<std::string> ServingAddress(const ExperimentConfig& config, int shard_index,
                                           const PsRunOptions& options) {
  if (!options.listen_address.empty()) return options.listen_address;
  PSTRAIN_ASSIGN_OR_RETURN(const HostPort entry, ParseHostPort(config.cluster().ps_hosts(shard_index)));
  return ListenAddress(config.cluster().listen_address(), entry);
}

// summaries: this shard's traffic and apply time, against its version
// (sync: the global step), in its own event file next to the chief's.
class ShardSummaries {
 public:
  // Writes nothing when summaries.dir is empty.
  static absl::StatusOr<ShardSummaries> Open(const ExperimentConfig& config, int shard_index) {
    ShardSummaries summaries;
    summaries.every_steps_ = config.summaries().every_steps();
    if (config.summaries().dir().empty()) return summaries;
    absl::StatusOr<std::unique_ptr<tb::EventFileWriter>> writer =
        tb::EventFileWriter::Create(config.summaries().dir(), absl::StrCat("ps", shard_index));
    if (!writer.ok()) {
      return absl::Status(writer.status().code(), absl::StrCat("summaries.dir: ", writer.status().message()));
    }
    summaries.writer_ = *std::move(writer);
    return summaries;
  }

  // Writes the shard's load once its version has advanced every_steps
  // since the last write (`last`: once it has advanced at all). After a
  // failed write the shard goes on without summaries.
  void Write(const PsShard& shard, bool last) {
    if (writer_ == nullptr) return;
    const int64_t step = shard.MinVersion();
    if (step < summarized_step_ + every_steps_ && !(last && step > summarized_step_)) return;
    summarized_step_ = step;
    const ShardLoad load = shard.Stats().load();
    absl::Status s = writer_->AddScalars(step, {{"ps/received_bytes", static_cast<double>(load.bytes_in())},
                                                {"ps/sent_bytes", static_cast<double>(load.bytes_out())},
                                                {"ps/apply_seconds", load.apply_seconds()},
                                                {"ps/applied_updates", static_cast<double>(load.applied_updates())}});
    if (!s.ok()) {
      LOG(WARNING) << "summaries: " << s.message() << " (the shard goes on without them)";
      writer_.reset();
    }
  }

 private:
  std::unique_ptr<tb::EventFileWriter> writer_;
  int64_t every_steps_ = 0;
  int64_t summarized_step_ = 0;
};

// The shard's periodic duty, every 50 ms, until every worker is done (OK;
// UNAVAILABLE naming the workers lost along the way), a check fails, or
// options.cancel.
absl::Status ServeUntilFinished(PsShard& shard, int shard_index, const PsRunOptions& options, PsMetrics* metrics,
                                ShardSummaries& summaries) {
  while (true) {
    if (metrics != nullptr) metrics->Update(shard.Stats());
    summaries.Write(shard, /*last=*/false);
    if (options.cancel != nullptr && options.cancel->load()) return absl::CancelledError("PS cancelled");
    if (absl::Status s = shard.Check(absl::Now()); !s.ok()) {
      LOG(ERROR) << "PS shard " << shard_index << ": " << s.message();
      return s;
    }
    if (shard.Finished()) {
      std::vector<int> lost = shard.LostWorkers();
      // elastic.on_worker_lost continue: losing workers is how the run goes.
      if (!lost.empty() && shard.continues_without_lost()) {
        LOG(WARNING) << "PS shard " << shard_index << ": workers [" << absl::StrJoin(lost, ",")
                     << "] were lost; the run went on without them (elastic.on_worker_lost continue)";
      } else if (!lost.empty()) {
        return absl::UnavailableError(
            absl::StrCat("workers [", absl::StrJoin(lost, ","), "] were lost during async training"));
      }
      return absl::OkStatus();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// After serving ended with `result`: no pull is left waiting, and the last
// summaries and the final statistics are reported.
void Finish(PsShard& shard, int shard_index, const absl::Status& result, const PsRunOptions& options,
            PsMetrics* metrics, ShardSummaries& summaries) {
  shard.CancelPendingPulls(
      result.ok() ? absl::CancelledError(absl::StrCat("PS shard ", shard_index, " finished"))
                  : absl::UnavailableError(absl::StrCat("PS shard ", shard_index, " stopped: ", result.message())));
  summaries.Write(shard, /*last=*/true);
  StatsResponse stats = shard.Stats();
  LogLoad(stats.load());
  LogTables(stats);
  if (metrics != nullptr) metrics->Update(stats);
  if (options.final_stats != nullptr) *options.final_stats = stats;
}

}  // namespace

absl::Status RunParameterServer(const ExperimentConfig& config, int shard_index, Transport* transport,
                                const PsRunOptions& options) {
  if (shard_index < 0 || shard_index >= config.cluster().ps_hosts_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PS index ", shard_index, " out of range of ", config.cluster().ps_hosts_size(), " ps_hosts"));
  }
  const PsShardOptions shard_options = ShardOptions(config, shard_index);
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsShard> shard, PsShard::Create(shard_options));
  PsService service(shard.get());
  std::unique_ptr<PsMetrics> metrics;
  if (options.metrics != nullptr) {
    std::vector<std::string> tables;
    for (const EmbeddingTableConfig& t : config.model().tables()) tables.push_back(t.name());
    PSTRAIN_ASSIGN_OR_RETURN(metrics, PsMetrics::Register(options.metrics, shard_index, tables));
  }

  PSTRAIN_ASSIGN_OR_RETURN(const std::string address, ServingAddress(config, shard_index, options));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, transport->Serve(address, &service));
  LOG(INFO) << "PS shard " << shard_index << " serving on " << address << " for " << shard_options.num_workers
            << " workers (" << config.consistency() << ")";
  PSTRAIN_ASSIGN_OR_RETURN(ShardSummaries summaries, ShardSummaries::Open(config, shard_index));

  const absl::Status result = ServeUntilFinished(*shard, shard_index, options, metrics.get(), summaries);
  Finish(*shard, shard_index, result, options, metrics.get(), summaries);
  server->Shutdown(absl::Seconds(2));
  return result;
}

}  // namespace pstrain
