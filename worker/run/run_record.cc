#include "worker/run/run_record.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/metrics/result_json.h"
#include "common/status_macros.h"

namespace pstrain {

RunResult DescribeRun(const ExperimentConfig& config, const std::string& model_name, const std::string& collective,
                      int64_t total_steps) {
  const int workers = config.cluster().worker_hosts_size();
  const int devices = config.devices_per_worker();
  const int batch = config.train().batch_size_per_device();
  RunResult result;
  result.set_experiment(config.name());
  result.set_model(model_name);
  result.set_variable_update(config.variable_update());
  result.set_local_parameter_device(config.local_parameter_device());
  result.set_all_reduce_spec(config.all_reduce_spec());
  result.set_consistency(config.consistency());
  result.set_staleness(config.staleness());
  result.set_transport(config.transport());
  result.set_num_ps(config.cluster().ps_hosts_size());
  result.set_num_workers(workers);
  result.set_devices_per_worker(devices);
  result.set_device(config.device());
  result.set_batch_size_per_device(batch);
  result.set_global_batch_size(static_cast<int64_t>(batch) * workers * devices);
  result.set_steps(total_steps);
  result.set_compression(config.compression());
  result.set_collective(collective);
  result.set_precision(ExperimentConfig::Precision_Name(config.precision()));
  result.set_loss_scaling(LossScalingConfig::Mode_Name(config.loss_scaling().mode()));
  return result;
}

void AddReports(const ClusterReport& cluster, const std::vector<Recovery>& recoveries, RunResult* result) {
  for (const Recovery& recovery : recoveries) *result->add_recoveries() = recovery;
  for (const ShardLoad& load : cluster.ps_load) *result->add_ps_load() = load;
  std::vector<WorkerReport> workers = cluster.workers;
  std::sort(workers.begin(), workers.end(),
            [](const WorkerReport& a, const WorkerReport& b) { return a.worker() < b.worker(); });
  double rate = 0, variance = 0, loss_sum = 0, initial_sum = 0;
  for (const WorkerReport& r : workers) {
    *result->add_workers() = r;
    rate += r.images_per_sec();
    variance += r.images_per_sec_stddev() * r.images_per_sec_stddev();
    loss_sum += r.final_loss();
    initial_sum += r.initial_loss();
    for (const std::string& warning : r.warnings())
      result->add_warnings(absl::StrCat("worker ", r.worker(), ": ", warning));
  }
  result->set_images_per_sec(rate);
  result->set_images_per_sec_stddev(std::sqrt(variance));
  result->set_final_loss(workers.empty() ? 0.0 : loss_sum / workers.size());
  result->set_initial_loss(workers.empty() ? 0.0 : initial_sum / workers.size());
  for (const MembershipChange& change : cluster.membership) *result->add_membership() = change;
  for (const Straggler& s : cluster.stragglers) *result->add_stragglers() = s;
  if (cluster.ledger) *result->mutable_data_ledger() = *cluster.ledger;
}

std::vector<std::string> MembershipLines(const RunResult& result) {
  std::vector<std::string> lines;
  for (const MembershipChange& c : result.membership()) {
    lines.push_back(absl::StrFormat("membership: worker %d %s at step %d, %.1f s into the run (%s)", c.worker(),
                                    c.change(), c.step(), c.seconds(), c.why()));
  }
  if (!result.has_data_ledger()) return lines;
  const LedgerReport& l = result.data_ledger();
  int64_t done = 0;
  for (int64_t n : l.examples_done()) done += n;
  lines.push_back(absl::StrFormat(
      "data ledger: %d of %d examples trained in %d epochs (chunks of %d), %d chunks handed out again after their "
      "worker was lost, %d late completions refused; per worker [%s]",
      done, l.total_examples(), l.examples_done_size(), l.chunk_examples(), l.chunks_reassigned(),
      l.completions_refused(), absl::StrJoin(l.examples_by_worker(), ",")));
  return lines;
}

std::vector<std::string> StragglerSummary(const RunResult& result, double wall_seconds) {
  if (result.num_ps() == 0) return {};
  if (result.stragglers().empty()) return {"stragglers: none (every worker kept its peers' pace)"};
  const LedgerReport& ledger = result.data_ledger();
  int64_t read = 0;
  for (int64_t n : ledger.examples_by_worker()) read += n;
  std::vector<std::string> lines;
  for (const Straggler& s : result.stragglers()) {
    std::string line = absl::StrFormat(
        "straggler: worker %d, %.2fx its peers' busy time per step (named at its step %d%s); %.1f s beyond their "
        "pace (%.1f%% of the run: under sync, the others' wait)",
        s.worker(), s.ratio(), s.named_at_step(),
        s.current() ? ", slow to the end" : ", not at the end: it kept pace again or was lost", s.excess_seconds(),
        100.0 * s.excess_seconds() / std::max(1e-9, wall_seconds));
    if (read > 0 && s.worker() < ledger.examples_by_worker_size()) {
      absl::StrAppendFormat(&line, "; it read %.1f%% of the examples (an even share: %.1f%%)",
                            100.0 * ledger.examples_by_worker(s.worker()) / read,
                            100.0 / ledger.examples_by_worker_size());
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::string EmulationSummary(const Emulation& e) {
  std::string line =
      absl::StrFormat("emulation: %d hosts, links %s, time scale %g", e.hosts(),
                      e.link_gbps() > 0 ? absl::StrFormat("%g Gbit/s", e.link_gbps()) : "uncapped", e.time_scale());
  if (e.byte_scale() > 1) absl::StrAppendFormat(&line, ", byte scale %g", e.byte_scale());
  if (e.device_images_per_sec() <= 0) return line;
  absl::StrAppendFormat(&line, "; scaling efficiency %.3f against one device at %.1f images/sec",
                        e.scaling_efficiency(), e.device_images_per_sec());
  absl::StrAppend(&line, e.cpu_bound() ? absl::StrFormat("; CPU-BOUND, not valid: %s; try time_scale %g",
                                                         e.cpu_bound_reason(), e.suggested_time_scale())
                                       : std::string("; valid (this machine kept up)"));
  return line;
}

absl::Status WriteRunResult(const RunResult& result, const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::create_directories(run_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create run directory ", run_dir, ": ", ec.message()));
  const std::string path = run_dir + "/result.json";
  PSTRAIN_RETURN_IF_ERROR(WriteResultJson(result, path));
  std::cout << "result: " << path << std::endl;
  return absl::OkStatus();
}

}  // namespace pstrain
