#include "worker/ps_client.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"
#include "common/network_namespace.h"
#include "common/ps_rpc.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Options for a call that waits for its shard to be reachable (a shard still
// starting, or restarting) until `deadline`, answer included.
CallOptions OnceReachable(absl::Time deadline) {
  CallOptions options;
  options.deadline = deadline;
  options.wait_for_ready = true;
  return options;
}

void DescribePart(const VariablePart& part, TensorHeader* h) {
  h->set_name(part.name);
  for (int64_t d : part.shape) h->add_shape(d);
  h->set_dtype(DT_FLOAT32);
  h->set_num_bytes(part.count * sizeof(float));
}

// Where a pull answer of `batch` (indices into `parts`) may be received in
// place: each part's float32 values straight into its variable, the payload
// being the parts' values in batch order; nothing when values travel in 16
// bits.
PayloadDestination PullPlaces(const std::vector<VariablePart>& parts, const std::vector<int>& batch,
                              std::vector<Variable>& variables, Compression compression) {
  if (DenseWireDType(compression) != DT_FLOAT32) return nullptr;
  struct Place {
    uint64_t offset;  // in the answer's payload
    uint64_t bytes;
    char* data;
  };
  std::vector<Place> places;
  uint64_t offset = 0;
  for (int i : batch) {
    const VariablePart& part = parts[i];
    const uint64_t bytes = static_cast<uint64_t>(part.count) * sizeof(float);
    places.push_back({offset, bytes, reinterpret_cast<char*>(variables[part.variable].value.data() + part.offset)});
    offset += bytes;
  }
  return [places = std::move(places)](uint64_t offset, size_t bytes) -> void* {
    auto after =
        std::upper_bound(places.begin(), places.end(), offset, [](uint64_t o, const Place& p) { return o < p.offset; });
    if (after == places.begin()) return nullptr;
    const Place& p = *std::prev(after);
    const uint64_t into = offset - p.offset;
    if (bytes > p.bytes || into > p.bytes - bytes) return nullptr;  // not within one part
    return p.data + into;
  };
}

}  // namespace

bool IsShardLostOrRestored(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable || status.code() == absl::StatusCode::kAborted;
}

uint64_t PsClient::NewIncarnation() {
  std::random_device device;
  const uint64_t value = (static_cast<uint64_t>(device()) << 32) ^ device();
  return value == 0 ? 1 : value;
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const ExperimentConfig& config, int worker_index,
                                                           Transport* transport, std::vector<Variable>* variables,
                                                           std::vector<VariablePart> parts) {
  const int num_shards = config.cluster().ps_hosts_size();
  std::unique_ptr<PsClient> client(new PsClient(config, worker_index, variables, std::move(parts)));
  client->shard_parts_.resize(num_shards);
  for (size_t i = 0; i < client->parts_.size(); ++i) {
    const VariablePart& part = client->parts_[i];
    if (part.shard < 0 || part.shard >= num_shards)
      return absl::InvalidArgumentError("placement names a missing shard");
    if (part.variable < 0 || part.variable >= static_cast<int>(variables->size()) ||
        part.offset + part.count > (*variables)[part.variable].value.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("placement part ", part.name, " lies outside its variable"));
    }
    client->shard_parts_[part.shard].push_back(static_cast<int>(i));
  }
  client->Rebatch(config.ps_scheduling().batch_bytes());
  PSTRAIN_ASSIGN_OR_RETURN(client->compression_, ParseCompression(config.compression()));
  if (client->compression_ == Compression::kTopK) {
    for (const VariablePart& part : client->parts_) {
      client->topk_.push_back(std::make_unique<TopKEncoder>(part.count, config.topk_ratio()));
    }
  }
  for (const std::string& address : config.cluster().ps_hosts()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, transport->Connect(address));
    client->channels_.push_back(std::move(channel));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Channel> control, transport->Connect(address));
    client->control_channels_.push_back(std::move(control));
    client->addresses_.push_back(address);
  }
  return client;
}

void PsClient::Rebatch(int64_t batch_bytes) {
  batches_.clear();
  const int shards = static_cast<int>(shard_parts_.size());
  for (int s = 0; s < shards; ++s) {
    int64_t bytes_in_batch = 0;
    for (int i : shard_parts_[s]) {
      const int64_t bytes = parts_[i].count * static_cast<int64_t>(sizeof(float));
      if (batches_.empty() || batches_.back().shard != s || bytes_in_batch + bytes > batch_bytes) {
        batches_.push_back({s, {}});
        bytes_in_batch = 0;
      }
      batches_.back().parts.push_back(i);
      bytes_in_batch += bytes;
    }
  }
  // A client of no variables (the shards hold only embedding tables,
  // worker/table_session.h) keeps one empty batch per shard: its Join asks
  // every shard, waiting for the chief's Init there and adopting its
  // generation.
  if (parts_.empty()) {
    for (int s = 0; s < shards; ++s) batches_.push_back({s, {}});
  }
}

ConstChunk PsClient::PartChunk(const VariablePart& p, const Tensor& tensor) const {
  return {tensor.data() + p.offset, p.count * sizeof(float), tensor.buffer()};
}

void PsClient::AddPushTensor(int index, PushRequest* header, OutgoingFrame* request) {
  const VariablePart& part = parts_[index];
  TensorHeader* h = header->add_tensors();
  DescribePart(part, h);
  const float* gradient = (*variables_)[part.variable].grad.data() + part.offset;
  ConstChunk chunk;
  switch (compression_) {
    case Compression::kNone:
      chunk = PartChunk(part, (*variables_)[part.variable].grad);
      break;
    case Compression::kFp16:
    case Compression::kBf16: {
      const WireDType dtype = DenseWireDType(compression_);
      std::shared_ptr<Buffer> encoded = Buffer::AllocateUninitialized(part.count * WireDTypeSize(dtype));
      EncodeFloats(dtype, gradient, static_cast<size_t>(part.count), encoded->data());
      h->set_dtype(dtype);
      chunk = {encoded->data(), encoded->size(), encoded};
      break;
    }
    case Compression::kTopK: {
      TopKEncoder& topk = *topk_[index];
      std::shared_ptr<Buffer> pairs = Buffer::AllocateUninitialized(static_cast<size_t>(topk.wire_bytes()));
      uint32_t* indices = static_cast<uint32_t*>(pairs->data());
      topk.Encode(gradient, indices, reinterpret_cast<float*>(indices + topk.k()));
      h->set_sparse_count(topk.k());
      chunk = {pairs->data(), pairs->size(), pairs};
      break;
    }
  }
  h->set_num_bytes(chunk.size);
  bytes_pushed_ += static_cast<int64_t>(chunk.size);
  request->chunks.push_back(std::move(chunk));
}

absl::Status PsClient::ReadPulledPart(const VariablePart& part, const TensorHeader& h, IncomingFrame& response) {
  const size_t size = WireDTypeSize(h.dtype());
  float* dst = (*variables_)[part.variable].value.data() + part.offset;
  if (h.dtype() != DenseWireDType(compression_)) {
    // A part of it may have been received in place as float32 (PullPlaces).
    return absl::InternalError(
        absl::StrCat("pull: ", part.name, " arrived in dtype ", h.dtype(), ", not the one asked for"));
  }
  if (size == 0 || h.sparse_count() != 0 || h.num_bytes() != part.count * size) {
    return absl::InternalError(absl::StrCat("pull: ", part.name, " arrived as ", h.num_bytes(), " bytes of dtype ",
                                            h.dtype(), " for ", part.count, " elements"));
  }
  bytes_pulled_ += static_cast<int64_t>(h.num_bytes());
  if (h.dtype() == DT_FLOAT32) return response.Read(dst, h.num_bytes());
  std::vector<char> wire(h.num_bytes());
  PSTRAIN_RETURN_IF_ERROR(response.Read(wire.data(), wire.size()));
  DecodeFloats(h.dtype(), wire.data(), static_cast<size_t>(part.count), dst);
  return absl::OkStatus();
}

CallOptions PsClient::RpcOptions() const {
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(config_.timeouts().rpc_seconds());
  return options;
}

absl::Status PsClient::FanOut(std::string_view method, std::vector<ShardCall>& calls, const CallOptions& options,
                              AnswerReader read) {
  // The calls live in state shared with their callbacks: after an early
  // return the others still complete into it.
  struct State {
    // Whether an answer with `status` is to be read now; if so, a read is
    // counted under way until Complete.
    bool StartRead(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu) {
      absl::MutexLock lock(&mu);
      const bool now = read != nullptr && status.ok() && ended_at_once < 0;
      if (now) ++reading;
      return now;
    }
    void Complete(int i, bool was_read, absl::Status status, IncomingFrame frame) ABSL_LOCKS_EXCLUDED(mu) {
      absl::MutexLock lock(&mu);
      if (was_read) --reading;
      if (ended_at_once < 0 && IsShardLostOrRestored(status)) ended_at_once = i;
      calls[i].status = std::move(status);
      // A read answer is let go here, so its buffers (a lane's ring) are
      // free before the others have come.
      if (!was_read) calls[i].response = std::move(frame);
      --pending;
    }

    absl::Mutex mu;
    std::vector<ShardCall> calls;
    AnswerReader read;
    int pending ABSL_GUARDED_BY(mu) = 0;
    int reading ABSL_GUARDED_BY(mu) = 0;         // reads under way
    int ended_at_once ABSL_GUARDED_BY(mu) = -1;  // the call that ended the fan-out early
  };
  auto state = std::make_shared<State>();
  state->read = std::move(read);
  const int n = static_cast<int>(calls.size());
  state->calls = std::move(calls);
  calls.clear();
  {
    absl::MutexLock lock(&state->mu);
    state->pending = n;
  }
  const std::vector<std::unique_ptr<Channel>>& channels = ps_rpc::IsControl(method) ? control_channels_ : channels_;
  for (int i = 0; i < n; ++i) {
    ShardCall& call = state->calls[i];
    CallOptions call_options = options;
    call_options.receive_into = call.in_place.receive_into;
    channels[call.shard]->Call(method, std::move(call.request), call_options,
                               [state, i, ticket = call.in_place.ticket](absl::Status status, IncomingFrame frame) {
                                 if (ticket != nullptr) ticket->Complete();
                                 const bool read = state->StartRead(status);
                                 if (read) status = state->read(i, frame);
                                 state->Complete(i, read, std::move(status), std::move(frame));
                               });
  }
  auto failed = [&](const ShardCall& call) {
    return absl::Status(call.status.code(), absl::StrCat(std::string(method), " to PS shard ", call.shard, " (",
                                                         addresses_[call.shard], "): ", call.status.message()));
  };
  absl::Status ended_early;
  {
    absl::MutexLock lock(&state->mu);
    state->mu.Await(absl::Condition(
        +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->pending == 0 || s->ended_at_once >= 0; },
        state.get()));
    if (state->pending == 0) {
      for (const ShardCall& call : state->calls) {
        if (!call.status.ok()) return failed(call);
      }
      calls = std::move(state->calls);
      return absl::OkStatus();
    }
    ended_early = failed(state->calls[state->ended_at_once]);
    state->mu.Await(absl::Condition(
        +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->reading == 0; }, state.get()));
  }
  // Pulls still open must not land in the variables after this returns.
  in_place_.Stop();
  return ended_early;
}

std::vector<PsClient::ShardCall> PsClient::CallsToEveryShard(const google::protobuf::MessageLite& header) const {
  std::vector<ShardCall> calls(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    calls[s].shard = s;
    header.SerializeToString(&calls[s].request.header);
  }
  return calls;
}

absl::Status PsClient::Init(int64_t total_steps, const std::vector<ShardRestore>* restore,
                            std::optional<absl::Duration> wait, const LedgerSpec* ledger) {
  if (restore != nullptr && static_cast<int>(restore->size()) != num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("init: ", restore->size(), " checkpoint files for ", num_shards(), " shards"));
  }
  // A generation above every shard's: shards that hold state (the chief
  // restarted, or a shard did) replace it. A shard that just died may still
  // refuse the first call on its old connection: asked again until the deadline.
  const absl::Time deadline = absl::Now() + wait.value_or(absl::Seconds(config_.timeouts().startup_seconds()));
  const CallOptions options = OnceReachable(deadline);
  PSTRAIN_ASSIGN_OR_RETURN(const std::vector<StatsResponse> shards, StatsOnceReachable(deadline));
  int64_t newest = 0;
  for (const StatsResponse& stats : shards) newest = std::max(newest, stats.generation());
  const int64_t generation = newest + 1;
  // One call per shard: a shard installs all its variables at once.
  std::vector<ShardCall> calls(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    calls[s].shard = s;
    InitRequest header;
    header.set_worker(worker_);
    header.set_total_steps(total_steps);
    header.set_generation(generation);
    if (restore != nullptr) *header.mutable_restore() = (*restore)[s];
    if (ledger != nullptr && s == 0) *header.mutable_ledger() = *ledger;
    for (int i : shard_parts_[s]) {
      const VariablePart& part = parts_[i];
      DescribePart(part, header.add_tensors());
      calls[s].request.chunks.push_back(PartChunk(part, (*variables_)[part.variable].value));
    }
    header.SerializeToString(&calls[s].request.header);
  }
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kInit, calls, options));
  generation_ = generation;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointResponse>> PsClient::Checkpoint(int64_t step,
                                                                     const std::vector<std::string>& paths,
                                                                     int64_t tables_since_step) {
  if (static_cast<int>(paths.size()) != num_shards()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: ", paths.size(), " paths for ", num_shards(), " shards"));
  }
  std::vector<ShardCall> calls(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    calls[s].shard = s;
    CheckpointRequest header;
    header.set_worker(worker_);
    header.set_step(step);
    header.set_path(paths[s]);
    header.set_tables_since_step(tables_since_step);
    header.SerializeToString(&calls[s].request.header);
  }
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kCheckpoint, calls, RpcOptions()));
  std::vector<CheckpointResponse> responses(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    if (!calls[s].response.ParseHeader(&responses[s])) {
      return absl::InternalError(absl::StrCat("checkpoint: malformed answer from shard ", s));
    }
  }
  return responses;
}

PullRequest PsClient::PullHeader(int batch, int64_t min_version, int64_t min_generation, int64_t generation,
                                 absl::Duration timeout, int64_t local_step) const {
  PullRequest header;
  header.set_worker(worker_);
  header.set_min_version(min_version);
  header.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  header.set_local_step(local_step);
  header.set_generation(generation);
  header.set_min_generation(min_generation);
  header.set_incarnation(incarnation_);
  // Values travel as the pushes' dense values do; float32 is the default.
  if (DenseWireDType(compression_) != DT_FLOAT32) header.set_value_dtype(DenseWireDType(compression_));
  for (int i : batches_[batch].parts) header.add_names(parts_[i].name);
  return header;
}

std::vector<PsClient::ShardCall> PsClient::PullCalls(int64_t min_version, int64_t min_generation, int64_t generation,
                                                     absl::Duration timeout, int64_t local_step) const {
  std::vector<ShardCall> calls(batches_.size());
  for (size_t b = 0; b < batches_.size(); ++b) {
    calls[b].shard = batches_[b].shard;
    calls[b].in_place = in_place_.Open(PullPlaces(parts_, batches_[b].parts, *variables_, compression_));
    PullHeader(static_cast<int>(b), min_version, min_generation, generation, timeout, local_step)
        .SerializeToString(&calls[b].request.header);
  }
  return calls;
}

void PsClient::PullBatchAsync(int batch, int64_t min_version, absl::Duration timeout, int64_t local_step,
                              std::function<void(absl::Status status, IncomingFrame response)> done) {
  OutgoingFrame request;
  PullHeader(batch, min_version, 0, generation_.load(), timeout, local_step).SerializeToString(&request.header);
  CallOptions options;
  // The PS answers at `timeout` with what it waited for; the RPC deadline
  // leaves room for that answer to arrive.
  options.deadline = absl::Now() + timeout + absl::Seconds(config_.timeouts().rpc_seconds());
  InPlacePulls::Call in_place = in_place_.Open(PullPlaces(parts_, batches_[batch].parts, *variables_, compression_));
  options.receive_into = std::move(in_place.receive_into);
  const int shard = batches_[batch].shard;
  const std::string address = addresses_[shard];
  channels_[shard]->Call(ps_rpc::kPull, std::move(request), options,
                         [done = std::move(done), shard, address, ticket = std::move(in_place.ticket)](
                             absl::Status status, IncomingFrame response) {
                           if (ticket != nullptr) ticket->Complete();
                           if (!status.ok()) {
                             status = absl::Status(status.code(), absl::StrCat("Pull from PS shard ", shard, " (",
                                                                               address, "): ", status.message()));
                           }
                           done(std::move(status), std::move(response));
                         });
}

absl::StatusOr<int64_t> PsClient::ReadBatchPull(int batch, IncomingFrame& response) {
  PullResponse header;
  return ReadBatchAnswer(batch, response, &header);
}

absl::StatusOr<int64_t> PsClient::ReadBatchAnswer(int batch, IncomingFrame& response, PullResponse* header) {
  const int s = batches_[batch].shard;
  if (!response.ParseHeader(header)) return absl::InternalError("pull: malformed response header");
  if (s == 0) pace_.SetStragglers({header->stragglers().begin(), header->stragglers().end()});
  if (header->tensors_size() != static_cast<int>(batches_[batch].parts.size())) {
    return absl::InternalError(absl::StrCat("pull: shard ", s, " returned ", header->tensors_size(), " tensors"));
  }
  if (header->versions_size() != header->tensors_size()) {
    return absl::InternalError(absl::StrCat("pull: shard ", s, " returned ", header->versions_size(), " versions for ",
                                            header->tensors_size(), " tensors"));
  }
  int64_t min_seen = INT64_MAX;
  for (int k = 0; k < header->tensors_size(); ++k) {
    const VariablePart& part = parts_[batches_[batch].parts[k]];
    const TensorHeader& h = header->tensors(k);
    if (h.name() != part.name) {
      return absl::InternalError(
          absl::StrCat("pull: shard ", s, " returned ", h.name(), " where ", part.name, " was expected"));
    }
    PSTRAIN_RETURN_IF_ERROR(ReadPulledPart(part, h, response));
    min_seen = std::min(min_seen, header->versions(k));
  }
  return min_seen;
}

int64_t PsClient::CombinePullAnswers(const std::vector<PulledBatch>& batches, JoinInfo* info) {
  int64_t min_seen = INT64_MAX;
  int64_t generation = INT64_MAX;
  for (const PulledBatch& batch : batches) {
    min_seen = std::min(min_seen, batch.version);
    resumed_step_ = batch.header.resumed_step();
    generation = std::min(generation, batch.header.generation());
    if (info != nullptr) {
      info->rejoined = info->rejoined || batch.header.rejoined();
      info->worker_steps = std::max(info->worker_steps, batch.header.worker_steps());
    }
  }
  // Shards restored one after the other may answer from two generations
  // for a moment: the older one is adopted, so requests to the newer shard
  // are ABORTED and the worker joins again.
  if (generation != INT64_MAX && (generation_.load() == 0 || info != nullptr)) generation_ = generation;
  if (info != nullptr) {
    info->resumed_step = resumed_step_;
    info->generation = generation_.load();
  }
  return min_seen == INT64_MAX ? 0 : min_seen;
}

absl::StatusOr<int64_t> PsClient::RunPulls(std::vector<ShardCall> calls, absl::Duration timeout, bool wait_for_ready,
                                           JoinInfo* info) {
  CallOptions options;
  // The PS answers at `timeout` with what it waited for; the RPC deadline
  // leaves room for that answer to arrive.
  options.deadline = absl::Now() + timeout + absl::Seconds(config_.timeouts().rpc_seconds());
  options.wait_for_ready = wait_for_ready;
  // Batch b is call b (PullCalls). Each read writes its own parts of the
  // variables and its own slot; shared so that no read outlives them.
  auto pulled = std::make_shared<std::vector<PulledBatch>>(calls.size());
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kPull, calls, options, [this, pulled](int b, IncomingFrame& answer) {
    PulledBatch& batch = (*pulled)[b];
    PSTRAIN_ASSIGN_OR_RETURN(batch.version, ReadBatchAnswer(b, answer, &batch.header));
    return absl::OkStatus();
  }));
  return CombinePullAnswers(*pulled, info);
}

absl::StatusOr<int64_t> PsClient::Pull(int64_t min_version, absl::Duration timeout, bool wait_for_ready,
                                       int64_t local_step) {
  return RunPulls(PullCalls(min_version, 0, generation_.load(), timeout, local_step), timeout, wait_for_ready, nullptr);
}

absl::StatusOr<PsClient::JoinInfo> PsClient::Join(int64_t min_generation, absl::Duration timeout) {
  // Answers to pulls from before (a failed step's) land nowhere from now on.
  in_place_.Stop();
  // Reachable first, within `timeout`: a pull's RPC deadline adds
  // rpc_seconds for a live shard's answer, which a shard that never comes
  // back must not get.
  const absl::Time give_up = absl::Now() + timeout;
  PSTRAIN_RETURN_IF_ERROR(StatsOnceReachable(give_up).status());
  // At least 1 ms: a shard takes a timeout of 0 as "rpc_seconds".
  const absl::Duration left = std::max(give_up - absl::Now(), absl::Milliseconds(1));
  JoinInfo info;
  PSTRAIN_ASSIGN_OR_RETURN(info.version, RunPulls(PullCalls(0, min_generation, /*generation=*/0, left, 0), left,
                                                  /*wait_for_ready=*/true, &info));
  return info;
}

absl::StatusOr<int> PsClient::Push(int64_t step, int64_t local_step) {
  std::vector<ShardCall> calls(batches_.size());
  for (size_t b = 0; b < batches_.size(); ++b) {
    calls[b].shard = batches_[b].shard;
    PushRequest header;
    header.set_worker(worker_);
    header.set_step(step);
    header.set_local_step(local_step);
    header.set_generation(generation_.load());
    header.set_incarnation(incarnation_);
    header.set_busy_seconds(pace_.busy_seconds());
    for (int i : batches_[b].parts) AddPushTensor(i, &header, &calls[b].request);
    header.SerializeToString(&calls[b].request.header);
  }
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kPush, calls, RpcOptions()));
  int dropped = 0;
  for (ShardCall& call : calls) {
    PushResponse header;
    if (call.response.ParseHeader(&header)) dropped += header.dropped_stale();
  }
  return dropped;
}

PsClient::BatchInfo PsClient::Batch(int batch) const {
  BatchInfo info;
  info.shard = batches_[batch].shard;
  for (int i : batches_[batch].parts) {
    info.bytes += parts_[i].count * static_cast<int64_t>(sizeof(float));
    std::vector<int>& vars = info.variables;
    if (std::find(vars.begin(), vars.end(), parts_[i].variable) == vars.end()) vars.push_back(parts_[i].variable);
  }
  return info;
}

void PsClient::PushBatchAsync(int batch, int64_t step, int64_t local_step,
                              std::function<void(absl::Status, int)> done) {
  const RpcBatch& b = batches_[batch];
  PushRequest header;
  header.set_worker(worker_);
  header.set_step(step);
  header.set_local_step(local_step);
  header.set_generation(generation_.load());
  header.set_incarnation(incarnation_);
  header.set_busy_seconds(pace_.busy_seconds());
  OutgoingFrame request;
  for (int i : b.parts) AddPushTensor(i, &header, &request);
  header.SerializeToString(&request.header);
  const int shard = b.shard;
  const std::string address = addresses_[shard];
  channels_[shard]->Call(ps_rpc::kPush, std::move(request), RpcOptions(),
                         [done = std::move(done), shard, address](absl::Status status, IncomingFrame response) {
                           if (!status.ok()) {
                             done(absl::Status(status.code(), absl::StrCat("Push to PS shard ", shard, " (", address,
                                                                           "): ", status.message())),
                                  0);
                             return;
                           }
                           PushResponse header;
                           done(absl::OkStatus(), response.ParseHeader(&header) ? header.dropped_stale() : 0);
                         });
}

absl::StatusOr<ChiefLayout> PsClient::Heartbeat(int64_t step, bool finished_pushing, bool paused,
                                                const ChiefLayout* layout) {
  HeartbeatRequest header;
  header.set_worker(worker_);
  header.set_step(step);
  header.set_finished_pushing(finished_pushing);
  header.set_paused(paused);
  header.set_incarnation(incarnation_);
  if (layout != nullptr) *header.mutable_layout() = *layout;
  std::vector<ShardCall> calls = CallsToEveryShard(header);
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(config_.timeouts().heartbeat_seconds() * 2 + 1);
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kHeartbeat, calls, options));
  HeartbeatResponse response;
  if (!calls[0].response.ParseHeader(&response)) {
    return absl::InternalError("heartbeat: malformed response from PS shard 0");
  }
  return response.layout();
}

absl::Status PsClient::Done(const WorkerReport& report) {
  DoneRequest header;
  *header.mutable_report() = report;
  std::vector<ShardCall> calls = CallsToEveryShard(header);
  return FanOut(ps_rpc::kDone, calls, RpcOptions());
}

absl::StatusOr<std::vector<StatsResponse>> PsClient::Stats() { return StatsWith(RpcOptions()); }

absl::StatusOr<std::vector<StatsResponse>> PsClient::StatsOnceReachable(absl::Time deadline) {
  // A connection a dead shard left behind can fail the first call sent on it
  // (UNAVAILABLE, "Connection reset by peer") even when waiting for ready:
  // such a call is tried again until the deadline.
  const absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    absl::StatusOr<std::vector<StatsResponse>> stats = StatsWith(OnceReachable(deadline));
    if (stats.ok() || !absl::IsUnavailable(stats.status()) || absl::Now() + backoff >= deadline) return stats;
    absl::SleepFor(backoff);
  }
}

absl::StatusOr<std::vector<StatsResponse>> PsClient::StatsWith(const CallOptions& options) {
  std::vector<ShardCall> calls = CallsToEveryShard(StatsRequest());
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kStats, calls, options));
  std::vector<StatsResponse> stats(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    if (!calls[s].response.ParseHeader(&stats[s])) return absl::InternalError("stats: malformed response");
  }
  return stats;
}

absl::StatusOr<StatsResponse> PsClient::ChiefShardStats(int64_t ledger_before_step) {
  StatsRequest request;
  request.set_ledger_before_step(ledger_before_step);
  std::vector<ShardCall> calls(1);
  request.SerializeToString(&calls[0].request.header);
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kStats, calls, RpcOptions()));
  StatsResponse stats;
  if (!calls[0].response.ParseHeader(&stats)) return absl::InternalError("stats: malformed response from PS shard 0");
  return stats;
}

absl::StatusOr<ChunkResponse> PsClient::Chunk(const std::vector<CompletedChunk>& completed) {
  ChunkRequest request;
  request.set_worker(worker_);
  request.set_incarnation(incarnation_);
  for (const CompletedChunk& c : completed) *request.add_completed() = c;
  std::vector<ShardCall> calls(1);
  request.SerializeToString(&calls[0].request.header);
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kChunk, calls, RpcOptions()));
  ChunkResponse response;
  if (!calls[0].response.ParseHeader(&response)) {
    return absl::InternalError("chunk: malformed response from PS shard 0");
  }
  return response;
}

std::vector<bool> PsClient::ColocatedShards() const {
  std::vector<bool> colocated;
  for (const std::string& address : addresses_) {
    absl::StatusOr<HostPort> hp = ParseHostPort(address);
    colocated.push_back(hp.ok() && HostInThisNetworkNamespace(hp->host));
  }
  return colocated;
}

}  // namespace pstrain
