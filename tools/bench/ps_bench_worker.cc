#include "tools/bench/ps_bench_worker.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "tools/bench/heartbeat_probe.h"
#include "tools/bench/ps_bench_pushpull.h"
#include "tools/bench/ps_bench_tcp.h"
#include "worker/ps_client.h"

namespace pstrain::bench {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

}  // namespace

BenchWorker::BenchWorker(const BenchWorkerContext& context, int index, Transport* transport)
    : context_(context), options_(context.options), index_(index), transport_(transport) {}

BenchWorker::~BenchWorker() = default;

void BenchWorker::ReleaseClient() { client_.reset(); }

void BenchWorker::Run() {
  Connect();
  context_.sync.ArriveAndWait();  // cluster up
  for (Phase phase : kPhases) RunPhase(phase);
  for (TcpPhase phase : kTcpPhases) RunTcpPhase(phase);
  SayDone();
}

// The client; the chief Inits; the first pull waits (parked on the shard)
// until the chief's Init has landed.
void BenchWorker::Connect() {
  variables_ = MakeVariables(options_);
  absl::StatusOr<std::unique_ptr<PsClient>> client =
      PsClient::Create(context_.config, index_, transport_, &variables_, context_.plan);
  if (!client.ok()) return Fail(client.status());
  client_ = *std::move(client);
  if (index_ == 0) {
    if (absl::Status s = client_->Init(/*total_steps=*/0); !s.ok()) Fail(s);
  }
  if (context_.sync.failed()) return;
  absl::StatusOr<int64_t> v = client_->Pull(0, absl::Seconds(kPsBenchStartupSeconds), /*wait_for_ready=*/true);
  ++tally_.pull_calls;
  if (!v.ok()) Fail(v.status());
}

// Warm-up rounds; everyone warm; the timed rounds, started together;
// everyone done.
void BenchWorker::RunPhase(Phase phase) {
  for (int64_t r = 0; r < options_.warmup_rounds && !context_.sync.failed(); ++r) {
    if (absl::Status s = RunRound(phase, nullptr); !s.ok()) Fail(s);
  }
  const int p = static_cast<int>(phase);
  context_.sync.ArriveAndWait();       // everyone warm
  SnapshotLoads(&phase_loads_[p][0]);  // then start together
  // No client when connecting failed: the probe then has nothing to call.
  HeartbeatProbe probe(
      [this] {
        return client_ == nullptr ? absl::FailedPreconditionError("no client") : client_->Heartbeat(0).status();
      },
      kHeartbeatProbeInterval);
  TimedRounds([&](PhaseTiming* timing) { return RunRound(phase, timing); }, tally_.timing[p]);
  tally_.timing[p].heartbeats = probe.Stop();
  context_.sync.ArriveAndWait();       // phase over for everyone
  SnapshotLoads(&phase_loads_[p][1]);  // before the next warm-up
}

// The same bytes over plain TCP to the shards' sinks: warm-up rounds;
// everyone warm; the timed rounds, started together; everyone done.
void BenchWorker::RunTcpPhase(TcpPhase phase) {
  std::unique_ptr<TcpSource> source;
  if (!context_.sync.failed()) {
    absl::StatusOr<std::unique_ptr<TcpSource>> made =
        TcpSource::Connect(context_.tcp_sinks, ShardBytes(context_.plan, options_.servers),
                           phase == TcpPhase::kBothWays, absl::Seconds(kPsBenchStartupSeconds));
    if (made.ok()) {
      source = *std::move(made);
    } else {
      Fail(made.status());
    }
  }
  auto round = [&](PhaseTiming*) { return source->Round(absl::Seconds(kPsBenchRpcSeconds)); };
  for (int64_t r = 0; r < options_.warmup_rounds && !context_.sync.failed(); ++r) {
    if (absl::Status s = round(nullptr); !s.ok()) Fail(s);
  }
  context_.sync.ArriveAndWait();  // everyone warm
  TimedRounds(round, tally_.tcp[static_cast<int>(phase)]);
  context_.sync.ArriveAndWait();  // phase over for everyone
}

// `rounds` rounds, or rounds for about `seconds` (at least one).
void BenchWorker::TimedRounds(const std::function<absl::Status(PhaseTiming*)>& round, PhaseTiming& timing) {
  const auto start = Clock::now();
  const auto until = start + std::chrono::duration<double>(options_.seconds);
  auto now = start;
  while (!context_.sync.failed()) {
    if (options_.rounds > 0 ? timing.rounds >= options_.rounds : (timing.rounds > 0 && now >= until)) break;
    if (absl::Status s = round(&timing); !s.ok()) {
      Fail(s);
      break;
    }
    ++timing.rounds;
    now = Clock::now();
  }
  timing.seconds = std::chrono::duration<double>(now - start).count();
}

// One round of `phase`; `timing` (null while warming up) collects call times.
absl::Status BenchWorker::RunRound(Phase phase, PhaseTiming* timing) {
  if (phase == Phase::kPushPull) {
    // A push (pull) call is one of the whole model, as Push() and Pull().
    ++tally_.push_calls;
    ++tally_.pull_calls;
    return PipelinedPushPull(*client_, context_.config.ps_scheduling().window_bytes(),
                             context_.config.ps_scheduling().pushes_per_shard(), absl::Seconds(kPsBenchRpcSeconds));
  }
  if (phase != Phase::kPull) {
    const auto t0 = Clock::now();
    // Async accepts any step not ahead of the variable; 0 always is.
    absl::StatusOr<int> dropped = client_->Push(0);
    if (timing != nullptr) timing->push_call_seconds += SecondsSince(t0);
    ++tally_.push_calls;
    if (!dropped.ok()) return dropped.status();
  }
  if (phase != Phase::kPush) {
    const auto t0 = Clock::now();
    absl::StatusOr<int64_t> version = client_->Pull(0, absl::Seconds(kPsBenchRpcSeconds));
    if (timing != nullptr) timing->pull_call_seconds += SecondsSince(t0);
    ++tally_.pull_calls;
    if (!version.ok()) return version.status();
  }
  return absl::OkStatus();
}

// Worker 0 snapshots the shards' load while everyone else waits.
void BenchWorker::SnapshotLoads(ShardLoad* out) {
  if (index_ == 0 && !context_.sync.failed()) {
    absl::StatusOr<std::vector<StatsResponse>> stats = client_->Stats();
    if (stats.ok()) {
      *out = SumLoads(*stats);
    } else {
      LOG(WARNING) << "stats: " << stats.status();  // diagnostics only
    }
  }
  context_.sync.ArriveAndWait();
}

void BenchWorker::SayDone() {
  if (client_ == nullptr) return;
  WorkerReport report;
  report.set_worker(index_);
  const PhaseTiming* t = tally_.timing;
  report.set_steps(t[0].rounds + t[1].rounds + t[2].rounds);
  if (absl::Status s = client_->Done(report); !s.ok()) Fail(s);
}

void BenchWorker::Fail(const absl::Status& s) {
  if (status_.ok()) {
    status_ = absl::Status(s.code(), absl::StrCat("worker ", index_, ": ", s.message()));
    LOG(ERROR) << status_;
  }
  context_.sync.Fail();
}

}  // namespace pstrain::bench
