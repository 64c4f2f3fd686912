#include "tools/bench/ps_bench_threads.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "models/model.h"
#include "ps/ps_runner.h"
#include "worker/ps_client.h"

namespace pstrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

// The barriers' snapshots: [0] cluster up, then per phase p: [1 + 4p] warm,
// [2 + 4p] timed part starts, [3 + 4p] ends, [4 + 4p] loads taken.
constexpr size_t kSnapshots = 1 + 4 * kNumPhases;

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

struct WorkerState {
  std::vector<Variable> variables;
  std::unique_ptr<Transport> own_transport;  // null when every role shares one
  std::unique_ptr<PsClient> client;
  WorkerTally tally;
  absl::Status status;  // the first error
};

// What every worker thread shares.
struct Shared {
  const PsBenchOptions& options;
  const ExperimentConfig& config;
  const std::vector<VariablePart>& plan;
  PhaseBarrier& barrier;
  std::atomic<bool>& failed;  // some worker failed: everyone stops working
  // Shard loads summed over shards at the start and end of each phase's
  // timed part (taken by worker 0 while the others wait at a barrier).
  ShardLoad (&phase_loads)[kNumPhases][2];
};

// One worker's whole life (Run): connect, (chief) Init, first pull, the
// phases in step with the others, Done. It arrives at every barrier, even
// after an error, so the others never wait for it forever.
class BenchWorker {
 public:
  BenchWorker(Shared& shared, int index, Transport* transport, WorkerState& state)
      : shared_(shared), options_(shared.options), index_(index), transport_(transport), state_(state) {}

  void Run() {
    Connect();
    shared_.barrier.arrive_and_wait();  // cluster up
    for (Phase phase : kPhases) RunPhase(phase);
    SayDone();
  }

 private:
  // The client; the chief Inits; the first pull waits (parked on the shard)
  // until the chief's Init has landed.
  void Connect() {
    state_.variables = MakeVariables(options_);
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        PsClient::Create(shared_.config, index_, transport_, &state_.variables, shared_.plan);
    if (!client.ok()) return Fail(client.status());
    state_.client = *std::move(client);
    if (index_ == 0) {
      if (absl::Status s = state_.client->Init(/*total_steps=*/0); !s.ok()) Fail(s);
    }
    if (shared_.failed) return;
    absl::StatusOr<int64_t> v = state_.client->Pull(0, absl::Seconds(kPsBenchStartupSeconds), /*wait_for_ready=*/true);
    ++state_.tally.pull_calls;
    if (!v.ok()) Fail(v.status());
  }

  // Warm-up rounds; everyone warm; the timed rounds, started together;
  // everyone done.
  void RunPhase(Phase phase) {
    for (int64_t r = 0; r < options_.warmup_rounds && !shared_.failed; ++r) {
      if (absl::Status s = RunRound(phase, nullptr); !s.ok()) Fail(s);
    }
    const int p = static_cast<int>(phase);
    shared_.barrier.arrive_and_wait();          // everyone warm
    SnapshotLoads(&shared_.phase_loads[p][0]);  // then start together
    TimedRounds(phase, state_.tally.timing[p]);
    shared_.barrier.arrive_and_wait();          // phase over for everyone
    SnapshotLoads(&shared_.phase_loads[p][1]);  // before the next warm-up
  }

  // `rounds` rounds, or rounds for about `seconds` (at least one).
  void TimedRounds(Phase phase, PhaseTiming& timing) {
    const auto start = Clock::now();
    const auto until = start + std::chrono::duration<double>(options_.seconds);
    auto now = start;
    while (!shared_.failed) {
      if (options_.rounds > 0 ? timing.rounds >= options_.rounds : (timing.rounds > 0 && now >= until)) break;
      if (absl::Status s = RunRound(phase, &timing); !s.ok()) {
        Fail(s);
        break;
      }
      ++timing.rounds;
      now = Clock::now();
    }
    timing.seconds = std::chrono::duration<double>(now - start).count();
  }

  // One round of `phase`; `timing` (null while warming up) collects call times.
  absl::Status RunRound(Phase phase, PhaseTiming* timing) {
    if (phase != Phase::kPull) {
      const auto t0 = Clock::now();
      // Async accepts any step not ahead of the variable; 0 always is.
      absl::StatusOr<int> dropped = state_.client->Push(0);
      if (timing != nullptr) timing->push_call_seconds += SecondsSince(t0);
      ++state_.tally.push_calls;
      if (!dropped.ok()) return dropped.status();
    }
    if (phase != Phase::kPush) {
      const auto t0 = Clock::now();
      absl::StatusOr<int64_t> version = state_.client->Pull(0, absl::Seconds(kPsBenchRpcSeconds));
      if (timing != nullptr) timing->pull_call_seconds += SecondsSince(t0);
      ++state_.tally.pull_calls;
      if (!version.ok()) return version.status();
    }
    return absl::OkStatus();
  }

  // Worker 0 snapshots the shards' load while everyone else waits.
  void SnapshotLoads(ShardLoad* out) {
    if (index_ == 0 && !shared_.failed) {
      absl::StatusOr<std::vector<StatsResponse>> stats = state_.client->Stats();
      if (stats.ok()) {
        *out = SumLoads(*stats);
      } else {
        LOG(WARNING) << "stats: " << stats.status();  // diagnostics only
      }
    }
    shared_.barrier.arrive_and_wait();
  }

  void SayDone() {
    if (state_.client == nullptr) return;
    WorkerReport report;
    report.set_worker(index_);
    const PhaseTiming* t = state_.tally.timing;
    report.set_steps(t[0].rounds + t[1].rounds + t[2].rounds);
    if (absl::Status s = state_.client->Done(report); !s.ok()) Fail(s);
  }

  void Fail(const absl::Status& s) {
    if (state_.status.ok()) {
      state_.status = absl::Status(s.code(), absl::StrCat("worker ", index_, ": ", s.message()));
      LOG(ERROR) << state_.status;
    }
    shared_.failed = true;
  }

  Shared& shared_;
  const PsBenchOptions& options_;
  const int index_;
  Transport* const transport_;
  WorkerState& state_;
};

// Every shard and worker of one run, as threads of this process. Members
// are destroyed in reverse order of declaration: the workers (and their
// transports) first, then the shards' transports, the shared one last.
class ThreadCluster {
 public:
  ThreadCluster(const PsBenchOptions& options, PsBenchSetup& setup)
      : options_(options),
        setup_(setup),
        shard_transports_(options.servers),
        final_stats_(options.servers),
        shard_status_(options.servers) {
    transport_options_.max_message_bytes = setup.config.max_message_bytes();
    transport_options_.security = options.security;
    if (options.transport == "inproc") shared_transport_ = std::make_unique<InprocTransport>();
  }

  // Every shard's transport, then every shard's thread (RunParameterServer
  // until every worker is Done, or cancelled): nothing starts when a
  // transport cannot be created.
  absl::Status StartShards() {
    for (int s = 0; s < options_.servers; ++s) {
      absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport();
      if (!t.ok()) return t.status();
      shard_transports_[s] = *std::move(t);
    }
    for (int s = 0; s < options_.servers; ++s) {
      shard_threads_.emplace_back([this, s] {
        PsRunOptions run_options;
        run_options.listen_address = setup_.config.cluster().ps_hosts(s);
        run_options.cancel = &cancel_;
        run_options.final_stats = &final_stats_[s];
        shard_status_[s] = RunParameterServer(setup_.config, s, TransportOf(shard_transports_[s]), run_options);
        if (!shard_status_[s].ok()) LOG(ERROR) << "PS shard " << s << ": " << shard_status_[s];
      });
    }
    return absl::OkStatus();
  }

  // Every worker's transport; the first error.
  absl::Status MakeWorkerTransports() {
    for (int w = 0; w < options_.workers; ++w) {
      workers_.push_back(std::make_unique<WorkerState>());
      absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport();
      if (!t.ok()) return t.status();
      workers_.back()->own_transport = *std::move(t);
    }
    return absl::OkStatus();
  }

  // Every worker on its own thread, in step; joins them. The first worker's
  // error, in worker order.
  absl::Status RunWorkers() {
    PhaseBarrier barrier(options_.workers, BarrierCompletion{&setup_.reservations, &snapshots_});
    std::atomic<bool> failed{false};
    Shared shared{options_, setup_.config, setup_.plan, barrier, failed, phase_loads_};
    std::vector<std::thread> threads;
    for (int w = 0; w < options_.workers; ++w) {
      threads.emplace_back([&, w] {
        WorkerState& state = *workers_[w];
        BenchWorker(shared, w, TransportOf(state.own_transport), state).Run();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const auto& w : workers_) {
      if (!w->status.ok()) return w->status;
    }
    return absl::OkStatus();
  }

  // Joins the shards, cancelling them first when `cancel` (a worker that
  // failed may not have said Done); then drops the workers' clients (and
  // their channels) before the transports they came from.
  void StopShards(bool cancel) {
    if (cancel) cancel_ = true;
    for (std::thread& t : shard_threads_) t.join();
    for (auto& w : workers_) w->client.reset();
  }

  // The first shard's error, "PS shard <s>: ...".
  absl::Status ShardError() const {
    for (int s = 0; s < options_.servers; ++s) {
      if (!shard_status_[s].ok()) {
        return absl::Status(shard_status_[s].code(), absl::StrCat("PS shard ", s, ": ", shard_status_[s].message()));
      }
    }
    return absl::OkStatus();
  }

  PsBenchRun TakeRun() {
    PsBenchRun run;
    for (const auto& w : workers_) run.workers.push_back(w->tally);
    for (int p = 0; p < kNumPhases; ++p) {
      PhaseSpan& span = run.phases[p];
      span.load[0] = phase_loads_[p][0];
      span.load[1] = phase_loads_[p][1];
      if (snapshots_.size() == kSnapshots) {
        span.has_usage = true;
        span.usage[0] = snapshots_[2 + 4 * p];
        span.usage[1] = snapshots_[3 + 4 * p];
      }
    }
    run.final_stats = std::move(final_stats_);
    return run;
  }

 private:
  // A transport of its own for one role; null when every role shares one
  // (inproc needs one object shared by every role; other transports get one
  // per role, so every worker and shard has its own connections).
  absl::StatusOr<std::unique_ptr<Transport>> MakeTransport() {
    if (shared_transport_ != nullptr) return std::unique_ptr<Transport>();
    return CreateTransport(options_.transport, transport_options_);
  }
  Transport* TransportOf(const std::unique_ptr<Transport>& own) const {
    return own != nullptr ? own.get() : shared_transport_.get();
  }

  const PsBenchOptions& options_;
  PsBenchSetup& setup_;
  TransportOptions transport_options_;
  std::unique_ptr<Transport> shared_transport_;
  std::atomic<bool> cancel_{false};
  std::vector<std::unique_ptr<Transport>> shard_transports_;
  std::vector<StatsResponse> final_stats_;
  std::vector<absl::Status> shard_status_;
  std::vector<std::thread> shard_threads_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  std::vector<UsageSnapshot> snapshots_;
  ShardLoad phase_loads_[kNumPhases][2];
};

}  // namespace

absl::StatusOr<PsBenchRun> RunClusterInThreads(const PsBenchOptions& options, PsBenchSetup& setup) {
  ThreadCluster cluster(options, setup);
  if (absl::Status status = cluster.StartShards(); !status.ok()) return status;
  absl::Status status = cluster.MakeWorkerTransports();
  if (status.ok()) status = cluster.RunWorkers();
  cluster.StopShards(/*cancel=*/!status.ok());
  if (!status.ok()) return status;
  if (absl::Status shard = cluster.ShardError(); !shard.ok()) return shard;
  return cluster.TakeRun();
}

}  // namespace pstrain::bench
