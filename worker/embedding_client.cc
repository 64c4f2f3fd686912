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
  for (const EmbeddingTableConfig& t : config.model().tables()) {
    PSTRAIN_ASSIGN_OR_RETURN(const WireDType dtype, EmbeddingWireDType(t));
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

absl::Status EmbeddingClient::FanOut(std::string_view method, std::vector<std::optional<OutgoingFrame>> requests,
                                     std::vector<IncomingFrame>* responses, absl::Duration timeout) {
  struct State {
    absl::Mutex mu;
    int pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::Status> status ABSL_GUARDED_BY(mu);
    std::vector<IncomingFrame> frames ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<State>();
  {
    absl::MutexLock lock(&state->mu);
    state->status.resize(requests.size());
    state->frames.resize(requests.size());
    for (const std::optional<OutgoingFrame>& r : requests) state->pending += r.has_value() ? 1 : 0;
  }
  CallOptions options;
  options.deadline = absl::Now() + timeout;
  for (size_t s = 0; s < requests.size(); ++s) {
    if (!requests[s].has_value()) continue;
    bytes_sent_ += static_cast<int64_t>(requests[s]->payload_bytes());
    channels_[s]->Call(method, *std::move(requests[s]), options, [state, s](absl::Status status, IncomingFrame frame) {
      absl::MutexLock lock(&state->mu);
      state->status[s] = std::move(status);
      state->frames[s] = std::move(frame);
      --state->pending;
    });
  }
  absl::MutexLock lock(&state->mu);
  state->mu.Await(absl::Condition(
      +[](State* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->pending == 0; }, state.get()));
  for (size_t s = 0; s < state->status.size(); ++s) {
    if (!state->status[s].ok()) {
      return absl::Status(state->status[s].code(), absl::StrCat(std::string(method), " to PS shard ", s, " (",
                                                                addresses_[s], "): ", state->status[s].message()));
    }
    bytes_received_ += static_cast<int64_t>(state->frames[s].payload_bytes());
  }
  *responses = std::move(state->frames);
  return absl::OkStatus();
}

absl::Status EmbeddingClient::Pull(int t, const std::vector<uint64_t>& keys, int64_t min_version,
                                   absl::Duration timeout, float* rows) {
  const Table& table = tables_[t];
  const std::vector<ShardShare> shares = SplitByShard(keys);
  std::vector<std::optional<OutgoingFrame>> requests(shares.size());
  for (size_t s = 0; s < shares.size(); ++s) {
    if (shares[s].keys.empty()) continue;
    SparsePullRequest header;
    header.set_worker(worker_);
    header.set_table(table.config.name());
    header.set_num_ids(static_cast<int64_t>(shares[s].keys.size()));
    header.set_min_version(min_version);
    header.set_dtype(table.wire_dtype);
    header.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
    requests[s] = OutgoingFrame::FromHeader(header);
    requests[s]->chunks.push_back(OwnedChunk(KeyBytes(shares[s].keys)));
  }
  std::vector<IncomingFrame> responses;
  PSTRAIN_RETURN_IF_ERROR(FanOut(ps_rpc::kSparsePull, std::move(requests), &responses, timeout + rpc_timeout_));
  const int dim = table.config.dim();
  for (size_t s = 0; s < shares.size(); ++s) {
    if (shares[s].keys.empty()) continue;
    SparsePullResponse header;
    const size_t n = shares[s].keys.size();
    if (!responses[s].ParseHeader(&header) || header.dim() != dim || header.num_ids() != static_cast<int64_t>(n) ||
        responses[s].remaining() != n * dim * WireDTypeSize(header.dtype())) {
      return absl::DataLossError(absl::StrCat("sparse pull of '", table.config.name(), "' from PS shard ", s,
                                              ": the answer does not hold ", n, " rows of dim ", dim));
    }
    std::vector<char> wire(responses[s].remaining());
    PSTRAIN_RETURN_IF_ERROR(responses[s].Read(wire.data(), wire.size()));
    std::vector<float> decoded(n * dim);
    DecodeFloats(header.dtype(), wire.data(), decoded.size(), decoded.data());
    for (size_t i = 0; i < n; ++i) {
      std::copy_n(decoded.data() + i * dim, dim, rows + static_cast<size_t>(shares[s].positions[i]) * dim);
    }
  }
  return absl::OkStatus();
}

absl::Status EmbeddingClient::Push(int t, int64_t step, const std::vector<uint64_t>& keys, const float* grads) {
  const Table& table = tables_[t];
  const int dim = table.config.dim();
  const WireDType dtype = table.wire_dtype;
  const std::vector<ShardShare> shares = SplitByShard(keys);
  std::vector<std::optional<OutgoingFrame>> requests(shares.size());
  for (size_t s = 0; s < shares.size(); ++s) {
    const size_t n = shares[s].keys.size();
    SparsePushRequest header;
    header.set_worker(worker_);
    header.set_table(table.config.name());
    header.set_num_ids(static_cast<int64_t>(n));
    header.set_dim(dim);
    header.set_dtype(dtype);
    header.set_step(step);
    requests[s] = OutgoingFrame::FromHeader(header);
    std::vector<float> gathered(n * dim);
    for (size_t i = 0; i < n; ++i) {
      std::copy_n(grads + static_cast<size_t>(shares[s].positions[i]) * dim, dim, gathered.data() + i * dim);
    }
    std::vector<char> encoded(gathered.size() * WireDTypeSize(dtype));
    EncodeFloats(dtype, gathered.data(), gathered.size(), encoded.data());
    requests[s]->chunks.push_back(OwnedChunk(KeyBytes(shares[s].keys)));
    requests[s]->chunks.push_back(OwnedChunk(std::move(encoded)));
  }
  std::vector<IncomingFrame> responses;
  return FanOut(ps_rpc::kSparsePush, std::move(requests), &responses, rpc_timeout_);
}

}  // namespace pstrain
