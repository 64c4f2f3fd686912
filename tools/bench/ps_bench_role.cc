#include "tools/bench/ps_bench_role.h"

#include <signal.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"
#include "tools/bench/ps_bench_control.h"
#include "tools/bench/ps_bench_tcp.h"
#include "tools/bench/ps_bench_worker.h"

namespace pstrain::bench {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Longest a worker waits for the others at a meeting: the bench's own limit
// on a meeting plus slack, so the bench names the late worker first.
constexpr double kMeetingWaitSeconds = kPsBenchRpcSeconds + kPsBenchStartupSeconds;

RoleSecurity ToRecord(const TransportSecurity& s) {
  RoleSecurity r;
  r.set_tls(s.tls);
  r.set_cert_chain_pem(s.cert_chain_pem);
  r.set_private_key_pem(s.private_key_pem);
  r.set_ca_pem(s.ca_pem);
  r.set_require_client_cert(s.require_client_cert);
  r.set_reload_seconds(s.reload_seconds);
  r.set_cert_path(s.cert_path);
  r.set_key_path(s.key_path);
  r.set_ca_path(s.ca_path);
  r.set_server_name(s.server_name);
  r.set_token(s.token);
  return r;
}

TransportSecurity SecurityOf(const RoleSecurity& r) {
  TransportSecurity s;
  s.tls = r.tls();
  s.cert_chain_pem = r.cert_chain_pem();
  s.private_key_pem = r.private_key_pem();
  s.ca_pem = r.ca_pem();
  s.require_client_cert = r.require_client_cert();
  s.reload_seconds = r.reload_seconds();
  s.cert_path = r.cert_path();
  s.key_path = r.key_path();
  s.ca_path = r.ca_path();
  s.server_name = r.server_name();
  s.token = r.token();
  return s;
}

PhaseTimingRecord ToRecord(const PhaseTiming& t) {
  PhaseTimingRecord r;
  r.set_rounds(t.rounds);
  r.set_seconds(t.seconds);
  r.set_push_call_seconds(t.push_call_seconds);
  r.set_pull_call_seconds(t.pull_call_seconds);
  r.set_heartbeats(t.heartbeats.count);
  r.set_heartbeat_max_seconds(t.heartbeats.max_seconds);
  r.set_heartbeat_sum_seconds(t.heartbeats.sum_seconds);
  r.set_heartbeat_failures(t.heartbeats.failures);
  return r;
}

PhaseTiming TimingOf(const PhaseTimingRecord& r) {
  return PhaseTiming{r.rounds(), r.seconds(), r.push_call_seconds(), r.pull_call_seconds(),
                     HeartbeatRoundTrips{r.heartbeats(), r.heartbeat_failures(), r.heartbeat_max_seconds(),
                                         r.heartbeat_sum_seconds()}};
}

// Workers meet through the bench: a meet message there, and its answer
// once everyone has arrived. After a failure (its own, or the channel's)
// this worker no longer goes there: the bench stops the others.
class ProcessSync : public WorkerSync {
 public:
  ProcessSync(ControlChannel& channel, bool kill_self) : channel_(channel), kill_self_(kill_self) {}

  void ArriveAndWait() override {
    if (failed_) return;
    if (kill_self_ && ++meetings_ == 2) kill(getpid(), SIGKILL);  // tests: a worker dying mid-run
    RoleMessage meet;
    meet.mutable_meet();
    absl::Status s = channel_.Send(meet);
    if (s.ok()) {
      absl::StatusOr<RoleMessage> answer = channel_.Receive(absl::Now() + absl::Seconds(kMeetingWaitSeconds));
      s = !answer.ok()         ? answer.status()
          : answer->has_meet() ? absl::OkStatus()
                               : absl::UnavailableError("control: expected the answer to a meeting");
    }
    if (!s.ok()) {
      error_ = s;
      failed_ = true;
    }
  }
  bool failed() const override { return failed_; }
  void Fail() override { failed_ = true; }
  // The channel's error, if any.
  const absl::Status& error() const { return error_; }

 private:
  ControlChannel& channel_;
  const bool kill_self_;
  int meetings_ = 0;
  bool failed_ = false;
  absl::Status error_;
};

// Says why on stderr and on the channel; the exit code of a failed role.
int Failed(ControlChannel& channel, const std::string& message) {
  LOG(ERROR) << message;
  RoleMessage failure;
  failure.mutable_failure()->set_message(message);
  (void)channel.Send(failure);  // the bench may be gone: the exit status still says it
  return kExitFailure;
}

absl::StatusOr<std::unique_ptr<Transport>> MakeTransport(const PsBenchOptions& options, const RoleSetup& setup) {
  TransportOptions transport_options;
  transport_options.max_message_bytes = setup.config().max_message_bytes();
  transport_options.security = options.security;
  return CreateTransport(options.transport, transport_options);
}

int RunServer(ControlChannel& channel, const RoleSetup& setup, int index) {
  const PsBenchOptions options = OptionsOf(setup);
  const std::string name = absl::StrCat("PS shard ", index, ": ");
  absl::StatusOr<std::unique_ptr<Transport>> transport = MakeTransport(options, setup);
  if (!transport.ok()) return Failed(channel, name + transport.status().ToString());
  absl::StatusOr<std::unique_ptr<TcpSink>> sink = TcpSink::Listen(setup.tcp_sinks(index));
  if (!sink.ok()) return Failed(channel, name + sink.status().ToString());
  if (setup.kill_self()) kill(getpid(), SIGKILL);  // tests: a shard dying
  RoleMessage result;
  PsRunOptions run_options;
  run_options.listen_address = setup.config().cluster().ps_hosts(index);
  run_options.final_stats = result.mutable_server_result()->mutable_final_stats();
  const absl::Status status = RunParameterServer(setup.config(), index, transport->get(), run_options);
  if (!status.ok()) return Failed(channel, name + status.ToString());
  if (absl::Status s = channel.Send(result); !s.ok()) return Failed(channel, name + s.ToString());
  return kExitOk;
}

int RunWorker(ControlChannel& channel, const RoleSetup& setup, int index) {
  const PsBenchOptions options = OptionsOf(setup);
  const std::string name = absl::StrCat("worker ", index, ": ");
  absl::StatusOr<std::vector<VariablePart>> plan = PlanKeys(options, setup.config());
  if (!plan.ok()) return Failed(channel, name + plan.status().ToString());
  absl::StatusOr<std::unique_ptr<Transport>> transport = MakeTransport(options, setup);
  if (!transport.ok()) return Failed(channel, name + transport.status().ToString());
  const std::vector<std::string> sinks(setup.tcp_sinks().begin(), setup.tcp_sinks().end());
  ProcessSync sync(channel, setup.kill_self());
  BenchWorker worker(BenchWorkerContext{options, setup.config(), *plan, sinks, sync}, index, transport->get());
  worker.Run();
  worker.ReleaseClient();
  if (!worker.status().ok()) return Failed(channel, std::string(worker.status().message()));
  if (!sync.error().ok()) return Failed(channel, name + sync.error().ToString());
  ShardLoad loads[kNumPhases][2];
  for (int p = 0; p < kNumPhases; ++p) {
    for (int end = 0; end < 2; ++end) loads[p][end] = worker.phase_load(p, end);
  }
  RoleMessage result;
  *result.mutable_worker_result() = ToWorkerResult(worker.tally(), loads);
  if (absl::Status s = channel.Send(result); !s.ok()) return Failed(channel, name + s.ToString());
  return kExitOk;
}

}  // namespace

RoleSetup MakeRoleSetup(const PsBenchOptions& options, const PsBenchSetup& setup) {
  RoleSetup r;
  RoleOptions* o = r.mutable_options();
  o->set_workers(options.workers);
  o->set_servers(options.servers);
  o->set_key_bytes(options.key_bytes);
  o->set_keys(options.keys);
  o->set_transport(options.transport);
  o->set_seconds(options.seconds);
  o->set_rounds(options.rounds);
  o->set_warmup_rounds(options.warmup_rounds);
  o->set_placement(options.placement);
  *r.mutable_security() = ToRecord(options.security);
  *r.mutable_config() = setup.config;
  for (const std::string& sink : setup.tcp_sinks) r.add_tcp_sinks(sink);
  return r;
}

PsBenchOptions OptionsOf(const RoleSetup& setup) {
  const RoleOptions& o = setup.options();
  PsBenchOptions options;
  options.workers = o.workers();
  options.servers = o.servers();
  options.key_bytes = o.key_bytes();
  options.keys = o.keys();
  options.transport = o.transport();
  options.seconds = o.seconds();
  options.rounds = o.rounds();
  options.warmup_rounds = o.warmup_rounds();
  options.placement = o.placement();
  options.security = SecurityOf(setup.security());
  return options;
}

WorkerResult ToWorkerResult(const WorkerTally& tally, const ShardLoad (&loads)[kNumPhases][2]) {
  WorkerResult r;
  for (const PhaseTiming& t : tally.timing) *r.add_timing() = ToRecord(t);
  for (const PhaseTiming& t : tally.tcp) *r.add_tcp() = ToRecord(t);
  r.set_push_calls(tally.push_calls);
  r.set_pull_calls(tally.pull_calls);
  for (const auto& phase : loads) {
    for (const ShardLoad& load : phase) *r.add_phase_loads() = load;
  }
  return r;
}

WorkerTally TallyOf(const WorkerResult& result) {
  WorkerTally tally;
  for (int p = 0; p < kNumPhases && p < result.timing_size(); ++p) tally.timing[p] = TimingOf(result.timing(p));
  for (int t = 0; t < kNumTcpPhases && t < result.tcp_size(); ++t) tally.tcp[t] = TimingOf(result.tcp(t));
  tally.push_calls = result.push_calls();
  tally.pull_calls = result.pull_calls();
  return tally;
}

int RunPsBenchRole(const std::string& role, int index, const std::string& control_path) {
  if ((role != "server" && role != "worker") || index < 0 || control_path.empty()) {
    LOG(ERROR) << "ps-role: expected --role=server|worker --index=<i> --control=<path>, got --role=" << role
               << " --index=" << index << " --control=" << control_path;
    return kExitUsage;
  }
  absl::StatusOr<std::unique_ptr<ControlChannel>> channel = ControlChannel::Connect(control_path);
  if (!channel.ok()) {
    LOG(ERROR) << "ps-role: " << channel.status();
    return kExitFailure;
  }
  RoleMessage hello;
  hello.mutable_hello()->set_role(role);
  hello.mutable_hello()->set_index(index);
  absl::Status sent = (*channel)->Send(hello);
  absl::StatusOr<RoleMessage> setup =
      sent.ok() ? (*channel)->Receive(absl::Now() + absl::Seconds(kPsBenchStartupSeconds)) : sent;
  if (setup.ok() && !setup->has_setup()) setup = absl::UnavailableError("control: expected the setup");
  if (!setup.ok())
    return Failed(**channel, absl::StrCat("ps-role ", role, " ", index, ": ", setup.status().ToString()));
  const int count = role == "server" ? setup->setup().options().servers() : setup->setup().options().workers();
  if (index >= count || setup->setup().tcp_sinks_size() != setup->setup().options().servers()) {
    return Failed(**channel, absl::StrCat("ps-role ", role, " ", index, ": not in the setup's cluster"));
  }
  return role == "server" ? RunServer(**channel, setup->setup(), index) : RunWorker(**channel, setup->setup(), index);
}

}  // namespace pstrain::bench
