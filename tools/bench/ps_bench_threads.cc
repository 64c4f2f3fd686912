#include "tools/bench/ps_bench_threads.h"

#include <atomic>
#include <barrier>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/transport/inproc/inproc_transport.h"
#include "common/transport/transport.h"
#include "glog/logging.h"
#include "ps/ps_runner.h"
#include "tools/bench/ps_bench_tcp.h"
#include "tools/bench/ps_bench_worker.h"

namespace pstrain::bench {
namespace {

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

// The workers meet at one barrier; a failure is a flag they all see.
class ThreadSync : public WorkerSync {
 public:
  explicit ThreadSync(PhaseBarrier& barrier) : barrier_(barrier) {}
  void ArriveAndWait() override { barrier_.arrive_and_wait(); }
  bool failed() const override { return failed_; }
  void Fail() override { failed_ = true; }

 private:
  PhaseBarrier& barrier_;
  std::atomic<bool> failed_{false};
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
        shard_status_(options.servers),
        barrier_(options.workers, BarrierCompletion{&setup.reservations, &snapshots_}),
        sync_(barrier_),
        context_{options, setup.config, setup.plan, setup.tcp_sinks, sync_} {
    transport_options_.max_message_bytes = setup.config.max_message_bytes();
    transport_options_.security = options.security;
    if (options.transport == "inproc") shared_transport_ = std::make_unique<InprocTransport>();
  }

  // Every shard's transport, then every shard's TCP sink and thread
  // (RunParameterServer until every worker is Done, or cancelled): no shard
  // starts when a transport cannot be created.
  absl::Status StartShards() {
    for (int s = 0; s < options_.servers; ++s) {
      absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport();
      if (!t.ok()) return t.status();
      shard_transports_[s] = *std::move(t);
    }
    for (int s = 0; s < options_.servers; ++s) {
      absl::StatusOr<std::unique_ptr<TcpSink>> sink = TcpSink::Listen(setup_.tcp_sinks[s]);
      if (!sink.ok()) return sink.status();
      sinks_.push_back(*std::move(sink));
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

  // Every worker's transport and worker; the first error.
  absl::Status MakeWorkers() {
    for (int w = 0; w < options_.workers; ++w) {
      absl::StatusOr<std::unique_ptr<Transport>> t = MakeTransport();
      if (!t.ok()) return t.status();
      worker_transports_.push_back(*std::move(t));
      workers_.push_back(std::make_unique<BenchWorker>(context_, w, TransportOf(worker_transports_.back())));
    }
    return absl::OkStatus();
  }

  // Every worker on its own thread, in step; joins them. The first worker's
  // error, in worker order.
  absl::Status RunWorkers() {
    std::vector<std::thread> threads;
    for (const auto& w : workers_) threads.emplace_back([&w] { w->Run(); });
    for (std::thread& t : threads) t.join();
    for (const auto& w : workers_) {
      if (!w->status().ok()) return w->status();
    }
    return absl::OkStatus();
  }

  // Joins the shards, cancelling them first when `cancel` (a worker that
  // failed may not have said Done); then drops the workers' clients (and
  // their channels) before the transports they came from.
  void StopShards(bool cancel) {
    if (cancel) cancel_ = true;
    for (std::thread& t : shard_threads_) t.join();
    for (auto& w : workers_) w->ReleaseClient();
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
    for (const auto& w : workers_) run.workers.push_back(w->tally());
    for (int p = 0; p < kNumPhases; ++p) {
      PhaseSpan& span = run.phases[p];
      span.load[0] = workers_[0]->phase_load(p, 0);
      span.load[1] = workers_[0]->phase_load(p, 1);
      if (snapshots_.size() == kWorkerMeetings) {
        span.has_usage = true;
        span.usage[0] = snapshots_[TimedStartMeeting(p)];
        span.usage[1] = snapshots_[TimedEndMeeting(p)];
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
  std::vector<std::unique_ptr<TcpSink>> sinks_;
  std::vector<UsageSnapshot> snapshots_;
  PhaseBarrier barrier_;
  ThreadSync sync_;
  const BenchWorkerContext context_;
  std::vector<std::unique_ptr<Transport>> worker_transports_;
  std::vector<std::unique_ptr<BenchWorker>> workers_;
};

}  // namespace

absl::StatusOr<PsBenchRun> RunClusterInThreads(const PsBenchOptions& options, PsBenchSetup& setup) {
  ThreadCluster cluster(options, setup);
  if (absl::Status status = cluster.StartShards(); !status.ok()) return status;
  absl::Status status = cluster.MakeWorkers();
  if (status.ok()) status = cluster.RunWorkers();
  cluster.StopShards(/*cancel=*/!status.ok());
  if (!status.ok()) return status;
  if (absl::Status shard = cluster.ShardError(); !shard.ok()) return shard;
  return cluster.TakeRun();
}

}  // namespace pstrain::bench
