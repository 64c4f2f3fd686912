// One worker of the PS benchmark (ps_bench.h), whatever runs it: a thread of
// the bench (ps_bench_threads.h) or a process of its own. It meets the other
// workers through a WorkerSync, the one thing that differs between the two.
//
// Its life (Run):
//   connect | (worker 0) Init | first pull (waits for the Init) | meet
//   per phase: warm-up rounds | meet | loads | meet | timed rounds | meet | loads | meet
//   per TCP phase: connect to every sink | warm-up rounds | meet | timed rounds | meet
//   Done
// "loads": worker 0 takes the shards' summed loads (Stats) while the others
// wait at the next meeting, so a phase's load deltas hold exactly its timed
// rounds. Every worker arrives at every meeting, also after an error (then
// doing no more work), so nobody waits for it forever: the meetings number
// kWorkerMeetings in every run.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/placement.h"
#include "common/transport/transport.h"
#include "models/model.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "tools/bench/ps_bench.h"
#include "tools/bench/ps_bench_cluster.h"

namespace pstrain {
class PsClient;
}

namespace pstrain::bench {

// Meetings of a worker's life, in order: [0] cluster up, then per phase p:
// [1 + 4p] warm, [2 + 4p] timed part starts, [3 + 4p] ends, [4 + 4p] loads
// taken; then per TCP phase t: [1 + 4 * kNumPhases + 2t] timed part
// starts, [2 + 4 * kNumPhases + 2t] ends.
inline constexpr int kWorkerMeetings = 1 + 4 * kNumPhases + 2 * kNumTcpPhases;
// The meetings at the start and end of phase p's timed part.
inline constexpr int TimedStartMeeting(int p) { return 2 + 4 * p; }
inline constexpr int TimedEndMeeting(int p) { return 3 + 4 * p; }

// How the workers meet. Implementations are used by one worker each (or, for
// one shared by threads, must be thread-safe).
class WorkerSync {
 public:
  virtual ~WorkerSync() = default;
  // Returns once every worker has arrived at this meeting.
  virtual void ArriveAndWait() = 0;
  // Some worker failed: everyone stops working (and keeps meeting).
  virtual bool failed() const = 0;
  // This worker failed.
  virtual void Fail() = 0;
};

// What a worker runs with; everything outlives the worker.
struct BenchWorkerContext {
  const PsBenchOptions& options;
  const ExperimentConfig& config;
  const std::vector<VariablePart>& plan;
  const std::vector<std::string>& tcp_sinks;  // one per shard
  WorkerSync& sync;
};

class BenchWorker {
 public:
  // `transport`: the worker's own (or the one every role shares).
  BenchWorker(const BenchWorkerContext& context, int index, Transport* transport);
  ~BenchWorker();
  BenchWorker(const BenchWorker&) = delete;
  BenchWorker& operator=(const BenchWorker&) = delete;

  // The whole life above.
  void Run();

  const WorkerTally& tally() const { return tally_; }
  // The first error, "worker <i>: ..."; OK when none.
  const absl::Status& status() const { return status_; }
  // Worker 0's: the shards' summed loads at the start and end of each
  // phase's timed part (zero elsewhere, or when Stats failed: diagnostics).
  ShardLoad phase_load(int p, int end) const { return phase_loads_[p][end]; }
  // Drops the client (and its channels), before its transport goes.
  void ReleaseClient();

 private:
  void Connect();
  void RunPhase(Phase phase);
  void RunTcpPhase(TcpPhase phase);
  // `rounds` rounds of `round`, or rounds for about `seconds`.
  void TimedRounds(const std::function<absl::Status(PhaseTiming*)>& round, PhaseTiming& timing);
  absl::Status RunRound(Phase phase, PhaseTiming* timing);
  void SnapshotLoads(ShardLoad* out);
  void SayDone();
  void Fail(const absl::Status& s);

  const BenchWorkerContext context_;
  const PsBenchOptions& options_;
  const int index_;
  Transport* const transport_;
  std::vector<Variable> variables_;
  std::unique_ptr<PsClient> client_;
  WorkerTally tally_;
  ShardLoad phase_loads_[kNumPhases][2];
  absl::Status status_;
};

}  // namespace pstrain::bench
