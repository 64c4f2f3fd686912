#include "ps/ps_runner.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "common/status_macros.h"
#include "common/summary/event_writer.h"
#include "glog/logging.h"
#include "ps/ps_metrics.h"
#include "ps/ps_service.h"
#include "ps/shard.h"

namespace pstrain {
namespace {

void LogLoad(const ShardLoad& load) {
  LOG(INFO) << "shard " << load.shard() << " load: variables=" << load.variables()
            << " variable_bytes=" << load.variable_bytes() << " bytes_in=" << load.bytes_in()
            << " bytes_out=" << load.bytes_out() << " applied_updates=" << load.applied_updates()
            << " dropped_gradients=" << load.dropped_gradients() << " apply_seconds=" << load.apply_seconds()
            << " ssp_blocked_pulls=" << load.ssp_blocked_pulls() << " ssp_wait_seconds=" << load.ssp_wait_seconds();
}

}  // namespace

absl::Status RunParameterServer(const ExperimentConfig& config, int shard_index, Transport* transport,
                                const PsRunOptions& options) {
  if (shard_index < 0 || shard_index >= config.cluster().ps_hosts_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PS index ", shard_index, " out of range of ", config.cluster().ps_hosts_size(), " ps_hosts"));
  }
  PsShardOptions shard_options;
  shard_options.shard_index = shard_index;
  shard_options.num_workers = config.cluster().worker_hosts_size();
  shard_options.consistency = config.consistency();
  shard_options.replicas_to_aggregate = config.replicas_to_aggregate();
  shard_options.staleness = config.staleness();
  shard_options.optimizer = config.optimizer();
  shard_options.timeouts = config.timeouts();
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PsShard> shard, PsShard::Create(shard_options));
  PsService service(shard.get());
  std::unique_ptr<PsMetrics> metrics;
  if (options.metrics != nullptr) {
    PSTRAIN_ASSIGN_OR_RETURN(metrics, PsMetrics::Register(options.metrics, shard_index));
  }

  std::string address = options.listen_address;
  if (address.empty()) {
    PSTRAIN_ASSIGN_OR_RETURN(const HostPort entry, ParseHostPort(config.cluster().ps_hosts(shard_index)));
    address = ListenAddress(config.cluster().listen_address(), entry);
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Server> server, transport->Serve(address, &service));
  LOG(INFO) << "PS shard " << shard_index << " serving on " << address << " for " << shard_options.num_workers
            << " workers (" << config.consistency() << ")";

  // summaries: this shard's traffic and apply time, against its version
  // (sync: the global step), in its own event file next to the chief's.
  std::unique_ptr<tb::EventFileWriter> summaries;
  int64_t summarized_step = 0;
  if (!config.summaries().dir().empty()) {
    absl::StatusOr<std::unique_ptr<tb::EventFileWriter>> writer =
        tb::EventFileWriter::Create(config.summaries().dir(), absl::StrCat("ps", shard_index));
    if (!writer.ok())
      return absl::Status(writer.status().code(), absl::StrCat("summaries.dir: ", writer.status().message()));
    summaries = *std::move(writer);
  }
  auto summarize = [&](bool last) {
    if (summaries == nullptr) return;
    const int64_t step = shard->MinVersion();
    if (step < summarized_step + config.summaries().every_steps() && !(last && step > summarized_step)) return;
    summarized_step = step;
    const ShardLoad load = shard->Stats().load();
    absl::Status s = summaries->AddScalars(step, {{"ps/received_bytes", static_cast<double>(load.bytes_in())},
                                                  {"ps/sent_bytes", static_cast<double>(load.bytes_out())},
                                                  {"ps/apply_seconds", load.apply_seconds()},
                                                  {"ps/applied_updates", static_cast<double>(load.applied_updates())}});
    if (!s.ok()) {
      LOG(WARNING) << "summaries: " << s.message() << " (the shard goes on without them)";
      summaries.reset();
    }
  };

  absl::Status result;
  while (true) {
    if (metrics != nullptr) metrics->Update(shard->Stats());
    summarize(/*last=*/false);
    if (options.cancel != nullptr && options.cancel->load()) {
      result = absl::CancelledError("PS cancelled");
      break;
    }
    if (absl::Status s = shard->Check(absl::Now()); !s.ok()) {
      result = s;
      LOG(ERROR) << "PS shard " << shard_index << ": " << s.message();
      break;
    }
    if (shard->Finished()) {
      std::vector<int> lost = shard->LostWorkers();
      if (!lost.empty()) {
        result = absl::UnavailableError(
            absl::StrCat("workers [", absl::StrJoin(lost, ","), "] were lost during async training"));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  shard->CancelPendingPulls(
      result.ok() ? absl::CancelledError(absl::StrCat("PS shard ", shard_index, " finished"))
                  : absl::UnavailableError(absl::StrCat("PS shard ", shard_index, " stopped: ", result.message())));
  summarize(/*last=*/true);
  StatsResponse stats = shard->Stats();
  LogLoad(stats.load());
  if (metrics != nullptr) metrics->Update(stats);
  if (options.final_stats != nullptr) *options.final_stats = stats;
  server->Shutdown(absl::Seconds(2));
  return result;
}

}  // namespace pstrain
