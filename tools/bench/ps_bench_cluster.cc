#include "tools/bench/ps_bench_cluster.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain::bench {
namespace {

ExperimentConfig MakeConfig(const PsBenchOptions& options, const std::vector<std::string>& ps_hosts) {
  ExperimentConfig config;
  config.set_name("ps_bench");
  for (const std::string& host : ps_hosts) config.mutable_cluster()->add_ps_hosts(host);
  // Worker addresses are never dialled; only their count matters.
  for (int w = 0; w < options.workers; ++w) {
    config.mutable_cluster()->add_worker_hosts(absl::StrCat("127.0.0.1:", 1 + w));
  }
  config.set_consistency("async");  // the default variable_update keeps variables on the PS
  config.set_transport(options.transport);
  config.set_placement(options.placement);
  config.mutable_ps_scheduling()->set_window_bytes(options.window_bytes);
  config.mutable_ps_scheduling()->set_pushes_per_shard(options.pushes_per_shard);
  config.mutable_optimizer()->set_name("sgd");
  config.mutable_optimizer()->set_learning_rate(0.01f);
  TimeoutConfig* t = config.mutable_timeouts();
  t->set_rpc_seconds(kPsBenchRpcSeconds);
  t->set_startup_seconds(kPsBenchStartupSeconds);
  t->set_heartbeat_seconds(1);
  // Pull-only phases send nothing the shard counts as a sign of life; a long
  // phase must not get a worker declared lost.
  t->set_worker_lost_seconds(1e7);
  t->set_sync_step_seconds(kPsBenchRpcSeconds);
  return config;
}

}  // namespace

absl::StatusOr<PsBenchSetup> SetUpCluster(const PsBenchOptions& options, const std::vector<std::string>& shard_hosts) {
  PsBenchSetup setup;
  std::vector<std::string> ps_hosts;
  for (int s = 0; s < 2 * options.servers; ++s) {  // shards, then sinks
    std::string address;
    if (shard_hosts.empty()) {
      PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<PortReservation> reservation, PortReservation::Take());
      address = absl::StrCat("127.0.0.1:", reservation->port());
      setup.reservations.push_back(std::move(reservation));
    } else {
      address = absl::StrCat(shard_hosts[s % options.servers], ":", kHostBasePort + s);
    }
    (s < options.servers ? ps_hosts : setup.tcp_sinks).push_back(address);
  }
  setup.config = MakeConfig(options, ps_hosts);
  PSTRAIN_ASSIGN_OR_RETURN(setup.plan, PlanKeys(options, setup.config));
  return setup;
}

absl::StatusOr<std::vector<VariablePart>> PlanKeys(const PsBenchOptions& options, const ExperimentConfig& config) {
  std::vector<VariableShape> shapes;
  for (int k = 0; k < options.keys; ++k) shapes.push_back({absl::StrCat("key_", k), Shape{options.key_bytes / 4}});
  return PlanPlacement(shapes, options.servers, options.placement, config.partition_bytes());
}

UsageSnapshot TakeUsage() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  UsageSnapshot s;
  s.user_seconds = u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6;
  s.sys_seconds = u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
  s.minor_faults = u.ru_minflt;
  s.voluntary_switches = u.ru_nvcsw;
  s.involuntary_switches = u.ru_nivcsw;
  return s;
}

UsageSnapshot TakeUsage(const std::vector<pid_t>& pids) {
  UsageSnapshot sum;
  const double tick = 1.0 / sysconf(_SC_CLK_TCK);
  for (pid_t pid : pids) {
    const std::string proc = absl::StrCat("/proc/", pid);
    // Fields after the command's closing parenthesis: state is field 3,
    // minflt 10, utime 14, stime 15 (proc(5)); the whole thread group's.
    std::ifstream stat(proc + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(line.substr(paren + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (f.size() < 13) continue;
    sum.minor_faults += std::stoll(f[7]);
    sum.user_seconds += std::stoll(f[11]) * tick;
    sum.sys_seconds += std::stoll(f[12]) * tick;
    // Context switches are counted per thread.
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) {
      std::ifstream status(task.path() / "status");
      for (std::string l; std::getline(status, l);) {
        if (absl::StartsWith(l, "voluntary_ctxt_switches:")) sum.voluntary_switches += std::stoll(l.substr(24));
        if (absl::StartsWith(l, "nonvoluntary_ctxt_switches:")) sum.involuntary_switches += std::stoll(l.substr(27));
      }
    }
  }
  return sum;
}

}  // namespace pstrain::bench
