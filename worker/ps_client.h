// PsClient: a worker's view of all PS shards.
//
// The placement plan (common/placement.h) decides which shard holds each
// variable or part of one; every call fans out to the shards involved in parallel and waits
// for all of them. Pushes send gradients straight from the model's gradient
// buffers (zero-copy); pulls copy each value once, from the transport's
// buffers into the model's variable. With `compression` (common/compression/)
// pushes travel as 16-bit values or top-k pairs (one error-feedback residual
// per variable part), and with fp16/bf16 pulls too; the variables stay
// float32.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compression/compression.h"
#include "common/compression/topk.h"
#include "common/placement.h"
#include "common/transport/transport.h"
#include "models/model.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "worker/in_place_pulls.h"
#include "worker/step_pace.h"

namespace pstrain {

// A shard died (UNAVAILABLE) or was restored to a newer generation
// (ABORTED): a fan-out stops waiting for the other shards, and a strategy
// may recover (timeouts.ps_recover_seconds).
bool IsShardLostOrRestored(const absl::Status& status);

class PsClient {
 public:
  // `variables` is the model's list (fixed order); `parts` says where each
  // variable (or each slice of a partitioned one) lives. The client keeps
  // references to the variables' tensors.
  // No parts: a client of the shards' embedding tables alone
  // (worker/table_session.h), for Init, Join, Heartbeat, Stats and Done.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(const ExperimentConfig& config, int worker_index,
                                                          Transport* transport, std::vector<Variable>* variables,
                                                          std::vector<VariablePart> parts);

  // Chief only: installs the variables' current values on every shard; with
  // `restore` (one per shard), each shard takes its state from that
  // checkpoint file instead. The shards' state gets a new generation, above
  // every shard's current one (asked first with Stats): on shards that
  // already hold a generation (a restarted chief, or recovery after a shard
  // restarted) the new state replaces the old one and requests of the old
  // generation are ABORTED. Waits up to `wait` (default
  // timeouts.startup_seconds) for every shard to be reachable.
  // With `ledger` (data.sharding dynamic), shard 0 keeps the run's data
  // ledger from then on.
  absl::Status Init(int64_t total_steps, const std::vector<ShardRestore>* restore = nullptr,
                    std::optional<absl::Duration> wait = std::nullopt, const LedgerSpec* ledger = nullptr);

  // What a worker joining the shards' state learns (Join).
  struct JoinInfo {
    int64_t version = 0;       // the smallest version pulled
    int64_t resumed_step = 0;  // the checkpoint step the state was restored from
    int64_t generation = 0;
    // The shards heard from an earlier process of this worker: it was
    // restarted, and worker_steps is how far that process got.
    bool rejoined = false;
    int64_t worker_steps = 0;
  };
  // Pulls every variable once the shards are initialised at generation
  // `min_generation` or later (waiting for them to be reachable, and for
  // the chief's Init or restore, up to `timeout` in all; a reachable shard
  // that then stalls gets timeouts.rpc_seconds more to answer), and adopts
  // that generation: later calls carry it, and the shards answer ABORTED
  // once they hold a newer one.
  absl::StatusOr<JoinInfo> Join(int64_t min_generation, absl::Duration timeout);
  // The generation of the shards' state this client works on (0 before
  // Init or Join).
  int64_t generation() const { return generation_.load(); }
  // Fills every variable's value once each has at least `min_version`
  // updates; returns the smallest version received. `timeout` bounds the wait
  // (the PS answers with what it is waiting for when it expires).
  // `local_step` (ssp) is the step the worker is about to run.
  absl::StatusOr<int64_t> Pull(int64_t min_version, absl::Duration timeout, bool wait_for_ready = false,
                               int64_t local_step = 0);
  // Sends every variable's gradient for `step` (the version pulled);
  // `local_step` is the worker's own counter. Returns gradients dropped as stale.
  absl::StatusOr<int> Push(int64_t step, int64_t local_step = 0);

  // Pushes as the gradients become ready (overlapping backward): the RPC
  // batches, the variables each one carries, and an asynchronous push of one
  // batch. `done` gets the status and the number of stale-dropped gradients.
  int num_push_batches() const { return static_cast<int>(batches_.size()); }
  struct BatchInfo {
    int shard = 0;
    int64_t bytes = 0;           // the float32 bytes its parts hold
    std::vector<int> variables;  // the variables it carries parts of, in order
  };
  BatchInfo Batch(int batch) const;
  // Pushes and pulls of one shard travel in several concurrent RPCs of at
  // most `batch_bytes` each (whole parts: a larger part goes alone), so the
  // shard applies one batch while the next is still arriving: the RPC
  // batches are the unit the pipeline schedules. Create uses
  // ps_scheduling.batch_bytes; the layout tuner (worker/layout_tuner.h)
  // calls this again between steps. Not while a call is in flight.
  void Rebatch(int64_t batch_bytes);
  void PushBatchAsync(int batch, int64_t step, int64_t local_step,
                      std::function<void(absl::Status status, int dropped)> done);
  // The pipeline (worker/ps_pipeline.h): pulls one batch asynchronously once
  // its variables have `min_version` updates; `done` gets the answer
  // unread, and ReadBatchPull reads it into the variables when the caller
  // still wants it.
  void PullBatchAsync(int batch, int64_t min_version, absl::Duration timeout, int64_t local_step,
                      std::function<void(absl::Status status, IncomingFrame response)> done);
  // Returns the smallest version in the answer.
  absl::StatusOr<int64_t> ReadBatchPull(int batch, IncomingFrame& response);
  // Chief only: every shard writes its state at `step` to paths[shard];
  // returns each shard's answer (file size and CRC32C), in shard order.
  // `tables_since_step` > 0: the tables' rows changed since that step only.
  absl::StatusOr<std::vector<CheckpointResponse>> Checkpoint(int64_t step, const std::vector<std::string>& paths,
                                                             int64_t tables_since_step = 0);
  // The step the shards resumed from (a restored checkpoint's), as the last
  // pull reported it; 0 on a fresh start.
  int64_t resumed_step() const { return resumed_step_; }
  // Where each variable part lives (the manifest of a checkpoint lists them).
  const std::vector<VariablePart>& parts() const { return parts_; }
  // `finished_pushing`: this worker will push no more gradients; `paused`: it
  // waits for data (HeartbeatRequest.paused); `layout` (the chief's, when it
  // tunes): the transfer layout every worker is to apply. Returns the chief's
  // latest layout as shard 0 heard it (version 0: none).
  absl::StatusOr<ChiefLayout> Heartbeat(int64_t step, bool finished_pushing = false, bool paused = false,
                                        const ChiefLayout* layout = nullptr);
  absl::Status Done(const WorkerReport& report);
  // Stats of every shard, in shard order.
  absl::StatusOr<std::vector<StatsResponse>> Stats();
  // Shard 0's Stats, its ledger state as of `ledger_before_step`
  // (StatsRequest).
  absl::StatusOr<StatsResponse> ChiefShardStats(int64_t ledger_before_step = 0);
  // data.sharding dynamic: reports `completed` chunks to shard 0's ledger
  // and asks for the next one (this worker and process filled in).
  absl::StatusOr<ChunkResponse> Chunk(const std::vector<CompletedChunk>& completed);

  int num_shards() const { return static_cast<int>(channels_.size()); }
  // Per shard: whether it serves in this process's network namespace (its
  // address's host is "localhost" or one of its own addresses), reached
  // without crossing a link.
  std::vector<bool> ColocatedShards() const;
  // Payload bytes pushed and pulled so far, as they travelled.
  int64_t bytes_pushed() const { return bytes_pushed_.load(); }
  int64_t bytes_pulled() const { return bytes_pulled_.load(); }
  // This worker's busy time per step, which its pushes carry, and the
  // stragglers shard 0's pull answers name (worker/step_pace.h).
  StepPace& pace() { return pace_; }

 private:
  PsClient(const ExperimentConfig& config, int worker_index, std::vector<Variable>* variables,
           std::vector<VariablePart> parts)
      : config_(config),
        worker_(worker_index),
        variables_(variables),
        parts_(std::move(parts)),
        incarnation_(NewIncarnation()) {}
  static uint64_t NewIncarnation();
  // The bytes of part `p` inside `tensor` (a variable's value or gradient).
  ConstChunk PartChunk(const VariablePart& p, const Tensor& tensor) const;
  // Adds part `index`'s gradient to a push, encoded as `compression` says.
  // Not concurrent for one part (a part is in one RPC batch; a batch is
  // pushed once per step).
  void AddPushTensor(int index, PushRequest* header, OutgoingFrame* request);
  // Reads part `p`'s value (tensor `h` of a pull answer) into its variable.
  absl::Status ReadPulledPart(const VariablePart& p, const TensorHeader& h, IncomingFrame& response);

  // One RPC of a fan-out: its shard, request and (after FanOut) answer.
  struct ShardCall {
    int shard = 0;
    InPlacePulls::Call in_place;  // pulls: where its answer may be received in place
    OutgoingFrame request;
    IncomingFrame response;
    absl::Status status;
  };
  // Issues every call in parallel and waits for all; the first failure (in
  // call order) is returned, naming the shard. A call failing with
  // UNAVAILABLE or ABORTED (a shard died or was restored) returns at once
  // without waiting for the others (a pull parked on a live shard may wait
  // long); their answers are then discarded as they arrive, and `calls` is
  // left empty.
  // `read`, when given, reads call i's answer as it arrives, on the
  // transport's thread (answers in any order, several at once), while the
  // others are still on their way; its status becomes the call's. It is not
  // run for a failed call, nor once the fan-out has ended early, and FanOut
  // returns only after every read it started has finished. A read call's
  // `response` is left empty.
  using AnswerReader = std::function<absl::Status(int i, IncomingFrame& answer)>;
  absl::Status FanOut(std::string_view method, std::vector<ShardCall>& calls, const CallOptions& options,
                      AnswerReader read = nullptr);
  // The pull requests (one per RPC batch) for `min_version`.
  std::vector<ShardCall> PullCalls(int64_t min_version, int64_t min_generation, int64_t generation,
                                   absl::Duration timeout, int64_t local_step) const;
  // The pull request of one RPC batch.
  PullRequest PullHeader(int batch, int64_t min_version, int64_t min_generation, int64_t generation,
                         absl::Duration timeout, int64_t local_step) const;
  // Reads one batch's pull answer into the variables; returns its smallest
  // version, and its header in `header`.
  absl::StatusOr<int64_t> ReadBatchAnswer(int batch, IncomingFrame& response, PullResponse* header);
  // One batch's pull answer, read into the variables as it arrived.
  struct PulledBatch {
    int64_t version = 0;  // its smallest version
    PullResponse header;
  };
  // What the batches' answers say together; returns the smallest version.
  int64_t CombinePullAnswers(const std::vector<PulledBatch>& batches, JoinInfo* info);
  // Pull and Join: issues `calls`, reading each answer as it arrives, then
  // CombinePullAnswers.
  absl::StatusOr<int64_t> RunPulls(std::vector<ShardCall> calls, absl::Duration timeout, bool wait_for_ready,
                                   JoinInfo* info);
  // One call per shard, each carrying `header`.
  std::vector<ShardCall> CallsToEveryShard(const google::protobuf::MessageLite& header) const;
  // Stats of every shard, waiting for each to be reachable until `deadline`
  // (calls that fail UNAVAILABLE are tried again meanwhile).
  absl::StatusOr<std::vector<StatsResponse>> StatsOnceReachable(absl::Time deadline);
  absl::StatusOr<std::vector<StatsResponse>> StatsWith(const CallOptions& options);
  CallOptions RpcOptions() const;

  struct RpcBatch {
    int shard;
    std::vector<int> parts;  // indices into parts_
  };

  ExperimentConfig config_;
  int worker_;
  std::vector<Variable>* variables_;
  std::vector<VariablePart> parts_;
  std::vector<std::vector<int>> shard_parts_;  // part indices per shard
  std::vector<RpcBatch> batches_;
  std::vector<std::unique_ptr<Channel>> channels_;
  // One more connection per shard for the control methods
  // (ps_rpc::IsControl), which never queue behind bulk bytes.
  std::vector<std::unique_ptr<Channel>> control_channels_;
  std::vector<std::string> addresses_;
  Compression compression_ = Compression::kNone;
  std::vector<std::unique_ptr<TopKEncoder>> topk_;  // per part (topk only)
  int64_t resumed_step_ = 0;
  // Random per process, so a shard can tell a restarted worker.
  const uint64_t incarnation_;
  std::atomic<int64_t> generation_{0};
  std::atomic<int64_t> bytes_pushed_{0};
  std::atomic<int64_t> bytes_pulled_{0};
  StepPace pace_;
  // Pull answers received straight into the variables (PullPlaces in
  // ps_client.cc). Last, so that it is destroyed first: it waits for parts
  // still arriving into the variables while the channels are still up.
  InPlacePulls in_place_;
};

}  // namespace pstrain
