#include "tools/bench/ps_bench.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/placement.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "models/model.h"
#include "proto/config.pb.h"
#include "ps/ps_runner.h"
#include "tools/bench/memcpy_bandwidth.h"
#include "worker/ps_client.h"

namespace pstrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMinMemcpyBytes = int64_t{64} << 20;
// Generous: the bench must measure, not time out, even on a loaded machine.
constexpr double kRpcSeconds = 600;
constexpr double kStartupSeconds = 120;

// A loopback port held by a bound (not listening) socket with SO_REUSEPORT, so
// no other process is handed it while the PS shard (gRPC also sets
// SO_REUSEPORT) binds it. Released once the cluster is up.
class PortReservation {
 public:
  static absl::StatusOr<std::unique_ptr<PortReservation>> Take() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
    auto reservation = std::unique_ptr<PortReservation>(new PortReservation(fd));
    int one = 1;
    if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
      return absl::InternalError(absl::StrCat("setsockopt: ", std::strerror(errno)));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", std::strerror(errno)));
    }
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return absl::InternalError(absl::StrCat("getsockname: ", std::strerror(errno)));
    }
    reservation->port_ = ntohs(addr.sin_port);
    return reservation;
  }
  ~PortReservation() { ::close(fd_); }
  int port() const { return port_; }

 private:
  explicit PortReservation(int fd) : fd_(fd) {}
  int fd_;
  int port_ = 0;
};

// Process-wide resource usage at one instant.
struct UsageSnapshot {
  double user_seconds = 0;
  double sys_seconds = 0;
  int64_t minor_faults = 0;
  int64_t voluntary_switches = 0;
  int64_t involuntary_switches = 0;
};

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

// Runs (on one thread) each time every worker reaches the barrier: releases
// the port reservations (the first time the cluster is up, so the shards hold
// their ports) and records the process's resource usage, so each phase's
// CPU cost is the difference between its start and end snapshots.
struct BarrierCompletion {
  std::vector<std::unique_ptr<PortReservation>>* reservations;
  std::vector<UsageSnapshot>* snapshots;
  void operator()() noexcept {
    reservations->clear();
    snapshots->push_back(TakeUsage());
  }
};
using PhaseBarrier = std::barrier<BarrierCompletion>;

enum class Phase { kPush, kPull, kPushPull };

struct PhaseTiming {
  int64_t rounds = 0;
  double seconds = 0;
  double push_call_seconds = 0;  // inside PsClient::Push
  double pull_call_seconds = 0;  // inside PsClient::Pull
};

struct WorkerState {
  std::vector<Variable> variables;
  std::unique_ptr<Transport> own_transport;
  std::unique_ptr<PsClient> client;
  PhaseTiming timing[3];
  int64_t push_calls = 0;
  int64_t pull_calls = 0;
  absl::Status status;
};

ExperimentConfig MakeConfig(const PsBenchOptions& options, const std::vector<int>& ports) {
  ExperimentConfig config;
  config.set_name("ps_bench");
  for (int port : ports) config.mutable_cluster()->add_ps_hosts(absl::StrCat("127.0.0.1:", port));
  // Worker addresses are never dialled; only their count matters.
  for (int w = 0; w < options.workers; ++w) {
    config.mutable_cluster()->add_worker_hosts(absl::StrCat("127.0.0.1:", 1 + w));
  }
  config.set_consistency("async");  // the default variable_update keeps variables on the PS
  config.set_transport(options.transport);
  config.set_placement(options.placement);
  config.mutable_optimizer()->set_name("sgd");
  config.mutable_optimizer()->set_learning_rate(0.01f);
  TimeoutConfig* t = config.mutable_timeouts();
  t->set_rpc_seconds(kRpcSeconds);
  t->set_startup_seconds(kStartupSeconds);
  t->set_heartbeat_seconds(1);
  // Pull-only phases send nothing the shard counts as a sign of life; a long
  // phase must not get a worker declared lost.
  t->set_worker_lost_seconds(1e7);
  t->set_sync_step_seconds(kRpcSeconds);
  return config;
}

std::vector<Variable> MakeVariables(const PsBenchOptions& options) {
  std::vector<Variable> variables(options.keys);
  const int64_t n = options.key_bytes / 4;
  for (int k = 0; k < options.keys; ++k) {
    Variable& v = variables[k];
    v.name = absl::StrCat("key_", k);
    v.value = Tensor(Shape{n});
    v.grad = Tensor(Shape{n});
    std::fill_n(v.value.data(), n, 1.0f);
    std::fill_n(v.grad.data(), n, 1e-6f);
  }
  return variables;
}

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One round of `phase`; `timing` (null while warming up) collects call times.
absl::Status RunRound(PsClient& client, Phase phase, WorkerState& state, PhaseTiming* timing) {
  if (phase != Phase::kPull) {
    const auto t0 = Clock::now();
    // Async accepts any step not ahead of the variable; 0 always is.
    absl::StatusOr<int> dropped = client.Push(0);
    if (timing != nullptr) timing->push_call_seconds += SecondsSince(t0);
    ++state.push_calls;
    if (!dropped.ok()) return dropped.status();
  }
  if (phase != Phase::kPush) {
    const auto t0 = Clock::now();
    absl::StatusOr<int64_t> version = client.Pull(0, absl::Seconds(kRpcSeconds));
    if (timing != nullptr) timing->pull_call_seconds += SecondsSince(t0);
    ++state.pull_calls;
    if (!version.ok()) return version.status();
  }
  return absl::OkStatus();
}

// What every worker thread shares.
struct Shared {
  const PsBenchOptions& options;
  const ExperimentConfig& config;
  const std::vector<VariablePart>& plan;
  PhaseBarrier& barrier;
  std::atomic<bool>& failed;
  // Shard loads summed over shards at the start and end of each phase's
  // timed part (taken by worker 0 while the others wait at a barrier).
  ShardLoad (&phase_loads)[3][2];
};

ShardLoad SumLoads(const std::vector<StatsResponse>& stats) {
  ShardLoad sum;
  for (const StatsResponse& s : stats) {
    sum.set_bytes_in(sum.bytes_in() + s.load().bytes_in());
    sum.set_bytes_out(sum.bytes_out() + s.load().bytes_out());
    sum.set_apply_seconds(sum.apply_seconds() + s.load().apply_seconds());
    sum.set_applied_updates(sum.applied_updates() + s.load().applied_updates());
  }
  return sum;
}

// One worker's whole life: connect, (chief) Init, first pull, three phases in
// step with the others, Done. Always arrives at every barrier, even after an
// error, so the others never wait for it forever.
void RunWorker(Shared& shared, int index, Transport* transport, WorkerState& state) {
  const PsBenchOptions& options = shared.options;
  PhaseBarrier& barrier = shared.barrier;
  std::atomic<bool>& failed = shared.failed;
  // Worker 0 snapshots the shards' load while everyone else waits.
  auto snapshot_loads = [&](ShardLoad* out) {
    if (index == 0 && !failed) {
      absl::StatusOr<std::vector<StatsResponse>> stats = state.client->Stats();
      if (stats.ok()) {
        *out = SumLoads(*stats);
      } else {
        LOG(WARNING) << "stats: " << stats.status();  // diagnostics only
      }
    }
    barrier.arrive_and_wait();
  };
  auto fail = [&](absl::Status s) {
    if (state.status.ok()) {
      state.status = absl::Status(s.code(), absl::StrCat("worker ", index, ": ", s.message()));
      LOG(ERROR) << state.status;
    }
    failed = true;
  };
  state.variables = MakeVariables(options);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Create(shared.config, index, transport, &state.variables, shared.plan);
  if (client.ok()) {
    state.client = *std::move(client);
    if (index == 0) {
      if (absl::Status s = state.client->Init(/*total_steps=*/0); !s.ok()) fail(s);
    }
    if (!failed) {
      // Waits (parked on the shard) until the chief's Init has landed.
      absl::StatusOr<int64_t> v = state.client->Pull(0, absl::Seconds(kStartupSeconds), /*wait_for_ready=*/true);
      ++state.pull_calls;
      if (!v.ok()) fail(v.status());
    }
  } else {
    fail(client.status());
  }
  barrier.arrive_and_wait();  // cluster up

  for (Phase phase : {Phase::kPush, Phase::kPull, Phase::kPushPull}) {
    if (!failed) {
      for (int64_t r = 0; r < options.warmup_rounds && !failed; ++r) {
        if (absl::Status s = RunRound(*state.client, phase, state, nullptr); !s.ok()) fail(s);
      }
    }
    const int p = static_cast<int>(phase);
    barrier.arrive_and_wait();                  // everyone warm
    snapshot_loads(&shared.phase_loads[p][0]);  // then start together
    PhaseTiming& timing = state.timing[p];
    const auto start = Clock::now();
    const auto until = start + std::chrono::duration<double>(options.seconds);
    auto now = start;
    while (!failed) {
      if (options.rounds > 0 ? timing.rounds >= options.rounds : (timing.rounds > 0 && now >= until)) break;
      if (absl::Status s = RunRound(*state.client, phase, state, &timing); !s.ok()) {
        fail(s);
        break;
      }
      ++timing.rounds;
      now = Clock::now();
    }
    timing.seconds = std::chrono::duration<double>(now - start).count();
    barrier.arrive_and_wait();                  // phase over for everyone
    snapshot_loads(&shared.phase_loads[p][1]);  // before the next warm-up
  }

  if (state.client != nullptr) {
    WorkerReport report;
    report.set_worker(index);
    report.set_steps(state.timing[0].rounds + state.timing[1].rounds + state.timing[2].rounds);
    if (absl::Status s = state.client->Done(report); !s.ok()) fail(s);
  }
}

PhaseResult Summarize(const std::vector<std::unique_ptr<WorkerState>>& workers, Phase phase, int64_t bytes_per_round) {
  PhaseResult result;
  for (const auto& w : workers) {
    const PhaseTiming& t = w->timing[static_cast<int>(phase)];
    result.rounds += t.rounds;
    result.max_seconds = std::max(result.max_seconds, t.seconds);
    result.push_call_seconds += t.push_call_seconds;
    result.pull_call_seconds += t.pull_call_seconds;
    if (t.seconds > 0) result.gbps += static_cast<double>(bytes_per_round) * t.rounds * 8 / t.seconds / 1e9;
  }
  return result;
}

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

}  // namespace

absl::Status ValidatePsBenchOptions(const PsBenchOptions& options) {
  if (options.workers < 1)
    return absl::InvalidArgumentError(absl::StrCat("--workers must be >= 1, got ", options.workers));
  if (options.servers < 1)
    return absl::InvalidArgumentError(absl::StrCat("--servers must be >= 1, got ", options.servers));
  if (options.keys < 1) return absl::InvalidArgumentError(absl::StrCat("--keys must be >= 1, got ", options.keys));
  if (options.key_bytes <= 0 || options.key_bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--key_bytes must be a positive multiple of 4 (float32 keys), got ", options.key_bytes));
  }
  // One request carries every key of a shard; gRPC messages are at most 2 GiB - 1.
  const int64_t per_shard_keys = (options.keys + options.servers - 1) / options.servers;
  if (options.key_bytes > (int64_t{INT_MAX} - 4096) / per_shard_keys) {
    return absl::InvalidArgumentError(absl::StrCat("--keys x --key_bytes per shard (", per_shard_keys, " x ",
                                                   options.key_bytes, ") exceeds the 2 GiB message limit"));
  }
  std::vector<std::string> known = RegisteredTransports();
  known.push_back("inproc");  // not in the registry: the bench creates it directly (diagnostic baseline)
  if (std::find(known.begin(), known.end(), options.transport) == known.end()) {
    const std::string missing = TransportRegistry().UnavailableReason(options.transport);  // e.g. built without UCX
    return absl::InvalidArgumentError(absl::StrCat("unknown --transport '", options.transport,
                                                   "'; known: ", absl::StrJoin(known, ", "),
                                                   missing.empty() ? "" : absl::StrCat(" (", missing, ")")));
  }
  if (options.rounds < 0)
    return absl::InvalidArgumentError(absl::StrCat("--rounds must be >= 0, got ", options.rounds));
  if (options.rounds == 0 && !(options.seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--seconds must be > 0, got ", options.seconds));
  }
  if (options.warmup_rounds < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup_rounds must be >= 0, got ", options.warmup_rounds));
  }
  if (!(options.memcpy_seconds > 0)) return absl::InvalidArgumentError("memcpy seconds must be > 0");
  if (options.placement != "round_robin" && options.placement != "greedy") {
    return absl::InvalidArgumentError(absl::StrCat("unknown placement '", options.placement, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<PsBenchResult> RunPsBench(const PsBenchOptions& options) {
  if (absl::Status s = ValidatePsBenchOptions(options); !s.ok()) return s;
  PsBenchResult result;
  const int64_t bytes_per_round = options.key_bytes * options.keys;

  // 1. The yardstick, before any cluster thread exists.
  result.memcpy_buffer_bytes = std::max(bytes_per_round, kMinMemcpyBytes);
  const MemcpyBandwidth memcpy_bw = MeasureMemcpyBandwidth(result.memcpy_buffer_bytes, options.memcpy_seconds);
  result.memcpy_gbps = memcpy_bw.gbps;
  result.memcpy_mean_gbps = memcpy_bw.mean_gbps;

  // 2. Ports, config, placement.
  std::vector<std::unique_ptr<PortReservation>> reservations;
  std::vector<int> ports;
  for (int s = 0; s < options.servers; ++s) {
    absl::StatusOr<std::unique_ptr<PortReservation>> r = PortReservation::Take();
    if (!r.ok()) return r.status();
    ports.push_back((*r)->port());
    reservations.push_back(*std::move(r));
  }
  const ExperimentConfig config = MakeConfig(options, ports);
  std::vector<VariableShape> shapes;
  for (int k = 0; k < options.keys; ++k) shapes.push_back({absl::StrCat("key_", k), Shape{options.key_bytes / 4}});
  absl::StatusOr<std::vector<VariablePart>> plan =
      PlanPlacement(shapes, options.servers, options.placement, config.partition_bytes());
  if (!plan.ok()) return plan.status();

  TransportOptions transport_options;
  transport_options.max_message_bytes = config.max_message_bytes();
  transport_options.security = options.security;
  // inproc needs one object shared by every role; other transports get one
  // per role, so every worker and shard has its own connections.
  const bool share_transport = options.transport == "inproc";
  std::unique_ptr<Transport> shared_transport;
  if (share_transport) shared_transport = std::make_unique<InprocTransport>();
  auto make_transport = [&]() -> absl::StatusOr<std::unique_ptr<Transport>> {
    if (share_transport) return std::unique_ptr<Transport>();
    return CreateTransport(options.transport, transport_options);
  };

  // 3. The shards.
  std::atomic<bool> cancel{false};
  std::vector<std::unique_ptr<Transport>> shard_transports(options.servers);
  std::vector<StatsResponse> final_stats(options.servers);
  std::vector<absl::Status> shard_status(options.servers);
  for (int s = 0; s < options.servers; ++s) {
    absl::StatusOr<std::unique_ptr<Transport>> t = make_transport();
    if (!t.ok()) return t.status();
    shard_transports[s] = *std::move(t);
  }
  std::vector<std::thread> shard_threads;
  for (int s = 0; s < options.servers; ++s) {
    shard_threads.emplace_back([&, s] {
      PsRunOptions run_options;
      run_options.listen_address = config.cluster().ps_hosts(s);
      run_options.cancel = &cancel;
      run_options.final_stats = &final_stats[s];
      Transport* transport = share_transport ? shared_transport.get() : shard_transports[s].get();
      shard_status[s] = RunParameterServer(config, s, transport, run_options);
      if (!shard_status[s].ok()) LOG(ERROR) << "PS shard " << s << ": " << shard_status[s];
    });
  }

  // 4. The workers.
  std::vector<std::unique_ptr<WorkerState>> workers;
  // Barrier snapshots: [0] cluster up, then per phase p: [1 + 4p] warm,
  // [2 + 4p] timed part starts, [3 + 4p] ends, [4 + 4p] loads taken.
  std::vector<UsageSnapshot> snapshots;
  ShardLoad phase_loads[3][2];
  absl::Status setup_status;
  for (int w = 0; w < options.workers; ++w) {
    workers.push_back(std::make_unique<WorkerState>());
    absl::StatusOr<std::unique_ptr<Transport>> t = make_transport();
    if (!t.ok()) {
      setup_status = t.status();
      break;
    }
    workers.back()->own_transport = *std::move(t);
  }
  if (setup_status.ok()) {
    PhaseBarrier barrier(options.workers, BarrierCompletion{&reservations, &snapshots});
    std::atomic<bool> failed{false};
    Shared shared{options, config, *plan, barrier, failed, phase_loads};
    std::vector<std::thread> worker_threads;
    for (int w = 0; w < options.workers; ++w) {
      worker_threads.emplace_back([&, w] {
        WorkerState& state = *workers[w];
        Transport* transport = share_transport ? shared_transport.get() : state.own_transport.get();
        RunWorker(shared, w, transport, state);
      });
    }
    for (std::thread& t : worker_threads) t.join();
  }
  for (const auto& w : workers) {
    if (!w->status.ok()) {
      setup_status = w->status;
      break;
    }
  }
  // A worker that failed may not have said Done: release the shards.
  if (!setup_status.ok()) cancel = true;
  for (std::thread& t : shard_threads) t.join();
  // Drop clients (and their channels) before the transports they came from.
  for (auto& w : workers) w->client.reset();
  if (!setup_status.ok()) return setup_status;
  for (int s = 0; s < options.servers; ++s) {
    if (!shard_status[s].ok()) {
      return absl::Status(shard_status[s].code(), absl::StrCat("PS shard ", s, ": ", shard_status[s].message()));
    }
  }

  // 5. Figures.
  result.push = Summarize(workers, Phase::kPush, bytes_per_round);
  result.pull = Summarize(workers, Phase::kPull, bytes_per_round);
  result.pushpull = Summarize(workers, Phase::kPushPull, bytes_per_round);
  PhaseResult* phases[3] = {&result.push, &result.pull, &result.pushpull};
  for (int p = 0; p < 3; ++p) {
    const ShardLoad& a = phase_loads[p][0];
    const ShardLoad& b = phase_loads[p][1];
    phases[p]->cost.shard_apply_seconds = b.apply_seconds() - a.apply_seconds();
    phases[p]->cost.shard_applied_updates = b.applied_updates() - a.applied_updates();
  }
  if (snapshots.size() == 13) {
    for (int p = 0; p < 3; ++p) {
      const UsageSnapshot& a = snapshots[2 + 4 * p];
      const UsageSnapshot& b = snapshots[3 + 4 * p];
      PhaseCost& cost = phases[p]->cost;
      cost.user_seconds = b.user_seconds - a.user_seconds;
      cost.sys_seconds = b.sys_seconds - a.sys_seconds;
      cost.minor_faults = b.minor_faults - a.minor_faults;
      cost.voluntary_switches = b.voluntary_switches - a.voluntary_switches;
      cost.involuntary_switches = b.involuntary_switches - a.involuntary_switches;
    }
  }
  result.ratio = result.memcpy_gbps > 0 ? result.pushpull.gbps / result.memcpy_gbps : 0;
  for (const auto& w : workers) {
    result.push_calls += w->push_calls;
    result.pull_calls += w->pull_calls;
  }
  result.init_bytes = bytes_per_round;
  for (const StatsResponse& stats : final_stats) {
    result.shard_loads.push_back(stats.load());
    result.shard_bytes_in += stats.load().bytes_in();
    result.shard_bytes_out += stats.load().bytes_out();
  }
  return result;
}

// " security=tls+token" and the like; "" for plaintext.
static std::string SecurityName(const PsBenchOptions& options) {
  const TransportSecurity& s = options.security;
  if (!s.enabled()) return "";
  std::string name = s.tls ? (s.require_client_cert ? "mtls" : "tls") : "";
  if (!s.token.empty()) name += name.empty() ? "token" : "+token";
  return " security=" + name;
}

std::string FormatPsBenchTable(const PsBenchOptions& options, const PsBenchResult& result) {
  std::string out =
      absl::StrFormat("ps bench: workers=%d servers=%d keys=%d key_bytes=%d transport=%s%s\n", options.workers,
                      options.servers, options.keys, options.key_bytes, options.transport, SecurityName(options));
  auto phase = [&out](const char* name, const PhaseResult& p) {
    absl::StrAppendFormat(&out, "%-22s %10.2f Gbps  (%d rounds, %.2f s)\n", name, p.gbps, p.rounds, p.max_seconds);
  };
  phase("push", result.push);
  phase("pull", result.pull);
  phase("push+pull", result.pushpull);
  absl::StrAppendFormat(&out, "%-22s %10.2f Gbps  (%d MiB buffer)\n", "memcpy (1 thread)", result.memcpy_gbps,
                        result.memcpy_buffer_bytes >> 20);
  absl::StrAppendFormat(&out, "%-22s %10.3f\n", "ratio push+pull/memcpy", result.ratio);
  return out;
}

std::string FormatPsBenchProfile(const PsBenchOptions& options, const PsBenchResult& result) {
  std::string out = "process cost per phase (timed part; all threads):\n";
  absl::StrAppendFormat(&out, "%-10s %7s %7s %7s %9s %11s %11s %9s %9s\n", "phase", "wall s", "user s", "sys s",
                        "cpu/wall", "cpu s/GB*", "minflt/MiB", "vcsw/rnd", "ivcsw/rnd");
  auto line = [&](const char* name, const PhaseResult& p, int copies_per_round) {
    const double counted = static_cast<double>(p.rounds) * options.keys * options.key_bytes;
    const double mib = counted * copies_per_round / (1 << 20);  // bytes that crossed the wire
    const double cpu = p.cost.user_seconds + p.cost.sys_seconds;
    absl::StrAppendFormat(&out, "%-10s %7.2f %7.2f %7.2f %9.2f %11.3f %11.2f %9.1f %9.1f\n", name, p.max_seconds,
                          p.cost.user_seconds, p.cost.sys_seconds, p.max_seconds > 0 ? cpu / p.max_seconds : 0,
                          counted > 0 ? cpu / (counted / 1e9) : 0, mib > 0 ? p.cost.minor_faults / mib : 0,
                          p.rounds > 0 ? static_cast<double>(p.cost.voluntary_switches) / p.rounds : 0,
                          p.rounds > 0 ? static_cast<double>(p.cost.involuntary_switches) / p.rounds : 0);
  };
  line("push", result.push, 1);
  line("pull", result.pull, 1);
  line("push+pull", result.pushpull, 2);
  out += "(* CPU seconds per GB of counted goodput; minflt per MiB that crossed the wire)\n";
  absl::StrAppendFormat(&out, "%-10s %12s %12s %16s %14s\n", "phase", "ms/push", "ms/pull", "shard apply ms/push",
                        "apply GB/s");
  auto split = [&](const char* name, const PhaseResult& p, bool pushes, bool pulls) {
    const double n = static_cast<double>(p.rounds);
    const double applied_gb = static_cast<double>(p.cost.shard_applied_updates) * options.key_bytes / 1e9;
    absl::StrAppendFormat(
        &out, "%-10s %12.3f %12.3f %16.3f %14.2f\n", name, pushes && n > 0 ? p.push_call_seconds * 1e3 / n : 0,
        pulls && n > 0 ? p.pull_call_seconds * 1e3 / n : 0, pushes && n > 0 ? p.cost.shard_apply_seconds * 1e3 / n : 0,
        p.cost.shard_apply_seconds > 0 ? applied_gb / p.cost.shard_apply_seconds : 0);
  };
  split("push", result.push, true, false);
  split("pull", result.pull, false, true);
  split("push+pull", result.pushpull, true, true);
  absl::StrAppendFormat(&out, "memcpy: best slice %.2f Gbps, mean %.2f Gbps\n", result.memcpy_gbps,
                        result.memcpy_mean_gbps);
  for (const ShardLoad& load : result.shard_loads) {
    absl::StrAppendFormat(&out, "shard %d: bytes_in=%d bytes_out=%d applied_updates=%d apply_seconds=%.3f\n",
                          load.shard(), load.bytes_in(), load.bytes_out(), load.applied_updates(),
                          load.apply_seconds());
  }
  return out;
}

std::string FormatPsBenchJson(const PsBenchOptions& options, const PsBenchResult& result) {
  // The transport name is a registered one (validated): no escaping needed.
  return absl::StrCat("{\"push_gbps\":", JsonNumber(result.push.gbps), ",\"pull_gbps\":", JsonNumber(result.pull.gbps),
                      ",\"pushpull_gbps\":", JsonNumber(result.pushpull.gbps),
                      ",\"memcpy_gbps\":", JsonNumber(result.memcpy_gbps), ",\"ratio\":", JsonNumber(result.ratio),
                      ",\"workers\":", options.workers, ",\"servers\":", options.servers, ",\"keys\":", options.keys,
                      ",\"key_bytes\":", options.key_bytes, ",\"transport\":\"", options.transport, "\"}");
}

}  // namespace pstrain::bench
