#include "worker/embedding_client.h"

#include <algorithm>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/compression/compression.h"
#include "common/embedding_keys.h"
#include "common/ps_rpc.h"
#include "common/status_macros.h"
#include "proto/ps.pb.h"

namespace pstrain {
namespace {

// A chunk owning `bytes`.
ConstChunk OwnedChunk(std::vector<char> bytes) {
  auto owned = std::make_shared<std::vector<char>>(std::move(bytes));
  return ConstChunk{owned->data(), owned->size(), owned};
}

std::vector<char> KeyBytes(const std::vector<uint64_t>& keys) {
  const char* p = reinterpret_cast<const char*>(keys.data());
  return std::vector<char>(p, p + keys.size() * sizeof(uint64_t));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingClient>> EmbeddingClient::Create(const ExperimentConfig& config,
                                                                         int worker_index, Transport* transport) {
  if (config.model().tables().empty()) return absl::InvalidArgumentError("the model has no embedding tables");
  std::unique_ptr<EmbeddingClient> client(
      new EmbeddingClient(worker_index, absl::Seconds(config.timeouts().rpc_seconds())));
  for (const EmbeddingTableConfig& t : RunEmbeddingTables(config)) {
    const WireDType dtype = EmbeddingWireDType(t);
    client->tables_.push_back(Table{t, dtype});
  }
  for (const std::string& address : config.cluster().ps_hosts()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, transport->Connect(address));
    client->channels_.push_back(std::move(channel));
    client->addresses_.push_back(address);
  }
  return client;
}

SparseKeys DeduplicateIds(const EmbeddingTableConfig& table, absl::Span<const uint64_t> ids) {
  SparseKeys out;
  out.index.reserve(ids.size());
  absl::flat_hash_map<uint64_t, int32_t> seen;
  for (uint64_t id : ids) {
    const uint64_t key = EmbeddingRowKey(table, id);
    auto [it, inserted] = seen.try_emplace(key, static_cast<int32_t>(out.keys.size()));
    if (inserted) out.keys.push_back(key);
    out.index.push_back(it->second);
  }
  return out;
}

std::vector<EmbeddingClient::ShardShare> EmbeddingClient::SplitByShard(const std::vector<uint64_t>& keys) const {
  std::vector<ShardShare> shares(channels_.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ShardShare& share = shares[EmbeddingKeyShard(keys[i], static_cast<int>(channels_.size()))];
    share.keys.push_back(keys[i]);
    share.positions.push_back(static_cast<int32_t>(i));
  }
  return shares;
}

absl::Status EmbeddingClient::FanOut(std::string_view method, std::vector<Call> calls,
                                     std::vector<IncomingFrame>* responses, absl::Duration timeout) {
  struct State {
    absl::Mutex mu;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::Status> status ABSL_GUARDED_BY(mu);
    std::vector<IncomingFrame> frames ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>();
  {
    absl::MutexLock lock(&state->mu);
    state->status.resize(calls.size());
    state->frames.resize(calls.size());
    state->pending = calls.size();
  }
  CallOptions options;
  options.deadline = absl::Now() + timeout;
  options.wait_for_ready = reconnecting_;
  for (size_t c = 0; c < calls.size(); ++c) {
    bytes_sent_ += static_cast<int64_t>(calls[c].request.payload_bytes());
    channels_[calls[c].shard]->Call(method, std::move(calls[c].request), options,
                                    [state, c](absl::Status status, IncomingFrame frame) {
                                      absl::MutexLock lock(&state->mu);
                                      state->status[c] = std::move(status);
                                      state->frames[c] = std::move(frame);
                                      --state->pending;
                                    });
  }
  absl::MutexLock lock(&state->mu);
  state->mu.Await(absl::Condition(
      +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->pending == 0; }, state.get()));
  for (size_t c = 0; c < calls.size(); ++c) {
    if (!state->status[c].ok()) {
      const int s = calls[c].shard;
      return absl::Status(state->status[c].code(), absl::StrCat(std::string(method), " to PS shard ", s, " (",
                                                                addresses_[s], "): ", state->status[c].message()));
    }
    bytes_received_ += static_cast<int64_t>(state->frames[c].payload_bytes());
  }
  *responses = std::move(state->frames);
  reconnecting_ = false;
  return absl::OkStatus();
}

absl::Status EmbeddingClient::Pull(int t, const std::vector<uint64_t>& keys, int64_t min_version,
                                   absl::Duration timeout, float* rows) {
  return PullTables({TablePull{t, &keys, rows}}, min_version, timeout);
}

absl::Status EmbeddingClient::Push(int t, int64_t step, const std::vector<uint64_t>& keys, const float* grads) {
  return PushTables(step, {TablePush{t, &keys, grads}});
}

OutgoingFrame EmbeddingClient::PullRequest(const Table& table, const std::vector<uint64_t>& keys, int64_t min_version,
                                           absl::Duration timeout) const {
  SparsePullRequest header;
  header.set_worker(worker_);
  header.set_table(table.config.name());
  header.set_num_ids(static_cast<int64_t>(keys.size()));
  header.set_min_version(min_version);
  header.set_dtype(table.wire_dtype);
  header.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  header.set_generation(generation_);
  OutgoingFrame request = OutgoingFrame::FromHeader(header);
  request.chunks.push_back(OwnedChunk(KeyBytes(keys)));
  return request;
}

absl::Status EmbeddingClient::ReadPullAnswer(const Table& table, const ShardShare& share, int shard,
                                             IncomingFrame& response, float* rows) {
  const int dim = table.config.dim();
  const size_t n = share.keys.size();
  SparsePullResponse header;
  if (!response.ParseHeader(&header) || header.dim() != dim || header.num_ids() != static_cast<int64_t>(n) ||
      header.dtype() != table.wire_dtype || response.remaining() != n * dim * WireDTypeSize(header.dtype())) {
    return absl::DataLossError(absl::StrCat("sparse pull of '", table.config.name(), "' from PS shard ", shard,
                                            ": the answer does not hold ", n, " rows of dim ", dim, " in ",
                                            WireDTypeElements(table.wire_dtype)));
  }
  std::vector<char> wire(response.remaining());
  PSTRAIN_RETURN_IF_ERROR(response.Read(wire.data(), wire.size()));
  std::vector<float> decoded(n * dim);
  DecodeFloats(header.dtype(), wire.data(), decoded.size(), decoded.data());
  for (size_t i = 0; i < n; ++i) {
    std::copy_n(decoded.data() + i * dim, dim, rows + static_cast<size_t>(share.positions[i]) * dim);
  }
  return absl::OkStatus();
}

absl::Status EmbeddingClient::PullTables(const std::vector<TablePull>& pulls, int64_t min_version,
                                         absl::Duration timeout) {
  // Every table's share of every shard, all in flight together.
  struct Part {
    const TablePull* pull;
    int shard;
    ShardShare share;
  };
  std::vector<Call> calls;
  std::vector<Part> parts;  // per call
  for (const TablePull& pull : pulls) {
    std::vector<ShardShare> split = SplitByShard(*pull.keys);
    for (size_t s = 0; s < split.size(); ++s) {
      if (split[s].keys.empty()) continue;
      calls.push_back({static_cast<int>(s), PullRequest(tables_[pull.table], split[s].keys, min_version, timeout)});
      parts.push_back({&pull, static_cast<int>(s), std::move(split[s])});
    }
  }
  std::vector<IncomingFrame> responses;
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kSparsePull, std::move(calls), &responses, timeout + rpc_timeout_));
  for (size_t c = 0; c < parts.size(); ++c) {
    const Part& p = parts[c];
    PSTRAIN_RETURN_IF_ERROR(ReadPullAnswer(tables_[p.pull->table], p.share, p.shard, responses[c], p.pull->rows));
  }
  return absl::OkStatus();
}

OutgoingFrame EmbeddingClient::PushRequest(const Table& table, int64_t step, const ShardShare& share,
                                           const float* grads) const {
  const int dim = table.config.dim();
  const size_t n = share.keys.size();
  SparsePushRequest header;
  header.set_worker(worker_);
  header.set_table(table.config.name());
  header.set_num_ids(static_cast<int64_t>(n));
  header.set_dim(dim);
  header.set_dtype(table.wire_dtype);
  header.set_generation(generation_);
  header.set_step(step);
  OutgoingFrame request = OutgoingFrame::FromHeader(header);
  std::vector<float> gathered(n * dim);
  for (size_t i = 0; i < n; ++i) {
    std::copy_n(grads + static_cast<size_t>(share.positions[i]) * dim, dim, gathered.data() + i * dim);
  }
  std::vector<char> encoded(gathered.size() * WireDTypeSize(table.wire_dtype));
  EncodeFloats(table.wire_dtype, gathered.data(), gathered.size(), encoded.data());
  request.chunks.push_back(OwnedChunk(KeyBytes(share.keys)));
  request.chunks.push_back(OwnedChunk(std::move(encoded)));
  return request;
}

absl::Status EmbeddingClient::PushTables(int64_t step, const std::vector<TablePush>& pushes) {
  // Every shard gets every table's push (sync needs the empty ones too),
  // all in flight together.
  std::vector<Call> calls;
  for (const TablePush& push : pushes) {
    const std::vector<ShardShare> split = SplitByShard(*push.keys);
    for (size_t s = 0; s < split.size(); ++s) {
      calls.push_back({static_cast<int>(s), PushRequest(tables_[push.table], step, split[s], push.grads)});
    }
  }
  std::vector<IncomingFrame> responses;
  return FanOut(ps_rpc::kSparsePush, std::move(calls), &responses, rpc_timeout_);
}

}  // namespace pstrain
