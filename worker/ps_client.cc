#include "worker/ps_client.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

void DescribeTensor(const Variable& var, const Tensor& data, TensorHeader* h) {
  h->set_name(var.name);
  for (int64_t d : data.shape()) h->add_shape(d);
  h->set_dtype(DT_FLOAT32);
  h->set_num_bytes(data.num_bytes());
}

ConstChunk ChunkOf(const Tensor& t) { return {t.raw(), t.num_bytes(), t.buffer()}; }

}  // namespace

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Create(const ExperimentConfig& config, int worker_index,
                                                           Transport* transport, std::vector<Variable>* variables,
                                                           std::vector<int> plan) {
  const int num_shards = config.cluster().ps_hosts_size();
  if (plan.size() != variables->size()) return absl::InvalidArgumentError("placement plan does not match variables");
  std::unique_ptr<PsClient> client(new PsClient(config, worker_index, variables, std::move(plan)));
  client->shard_variables_.resize(num_shards);
  for (size_t i = 0; i < client->plan_.size(); ++i) {
    int shard = client->plan_[i];
    if (shard < 0 || shard >= num_shards) return absl::InvalidArgumentError("placement names a missing shard");
    client->shard_variables_[shard].push_back(static_cast<int>(i));
  }
  for (const std::string& address : config.cluster().ps_hosts()) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, transport->Connect(address));
    client->channels_.push_back(std::move(channel));
    client->addresses_.push_back(address);
  }
  return client;
}

CallOptions PsClient::RpcOptions() const {
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(config_.timeouts().rpc_seconds());
  return options;
}

absl::Status PsClient::FanOut(std::string_view method, std::vector<OutgoingFrame> requests,
                              const CallOptions& options, std::vector<IncomingFrame>* responses, bool all_shards) {
  const int n = num_shards();
  std::vector<absl::Status> statuses(n);
  std::vector<IncomingFrame> answers(n);
  std::vector<int> targets;
  for (int s = 0; s < n; ++s) {
    if (all_shards || !shard_variables_[s].empty()) targets.push_back(s);
  }
  absl::BlockingCounter pending(static_cast<int>(targets.size()));
  for (int s : targets) {
    channels_[s]->Call(method, std::move(requests[s]), options,
                       [s, &statuses, &answers, &pending](absl::Status status, IncomingFrame frame) {
                         statuses[s] = std::move(status);
                         answers[s] = std::move(frame);
                         pending.DecrementCount();
                       });
  }
  pending.Wait();
  for (int s : targets) {
    if (!statuses[s].ok()) {
      return absl::Status(statuses[s].code(), absl::StrCat(std::string(method), " to PS shard ", s, " (",
                                                           addresses_[s], "): ", statuses[s].message()));
    }
  }
  if (responses != nullptr) *responses = std::move(answers);
  return absl::OkStatus();
}

absl::Status PsClient::Init(int64_t total_steps) {
  std::vector<OutgoingFrame> requests(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    InitRequest header;
    header.set_worker(worker_);
    header.set_total_steps(total_steps);
    for (int i : shard_variables_[s]) {
      const Variable& var = (*variables_)[i];
      DescribeTensor(var, var.value, header.add_tensors());
      requests[s].chunks.push_back(ChunkOf(var.value));
    }
    header.SerializeToString(&requests[s].header);
  }
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(config_.timeouts().startup_seconds());
  options.wait_for_ready = true;
  return FanOut("Init", std::move(requests), options, nullptr, /*all_shards=*/true);
}

absl::StatusOr<int64_t> PsClient::Pull(int64_t min_version, absl::Duration timeout, bool wait_for_ready) {
  std::vector<OutgoingFrame> requests(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    PullRequest header;
    header.set_worker(worker_);
    header.set_min_version(min_version);
    header.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
    for (int i : shard_variables_[s]) header.add_names((*variables_)[i].name);
    header.SerializeToString(&requests[s].header);
  }
  CallOptions options;
  // The PS answers at `timeout` with what it waited for; the RPC deadline
  // leaves room for that answer to arrive.
  options.deadline = absl::Now() + timeout + absl::Seconds(config_.timeouts().rpc_seconds());
  options.wait_for_ready = wait_for_ready;
  std::vector<IncomingFrame> responses;
  PSTRAIN_RETURN_IF_ERROR(FanOut("Pull", std::move(requests), options, &responses, /*all_shards=*/false));
  int64_t min_seen = INT64_MAX;
  for (int s = 0; s < num_shards(); ++s) {
    if (shard_variables_[s].empty()) continue;
    PullResponse header;
    if (!responses[s].ParseHeader(&header)) return absl::InternalError("pull: malformed response header");
    if (header.tensors_size() != static_cast<int>(shard_variables_[s].size())) {
      return absl::InternalError(absl::StrCat("pull: shard ", s, " returned ", header.tensors_size(), " tensors"));
    }
    for (int k = 0; k < header.tensors_size(); ++k) {
      Variable& var = (*variables_)[shard_variables_[s][k]];
      const TensorHeader& h = header.tensors(k);
      if (h.name() != var.name || h.num_bytes() != var.value.num_bytes()) {
        return absl::InternalError(absl::StrCat("pull: shard ", s, " returned ", h.name(), " (", h.num_bytes(),
                                                " bytes) where ", var.name, " was expected"));
      }
      PSTRAIN_RETURN_IF_ERROR(responses[s].Read(var.value.raw(), var.value.num_bytes()));
      min_seen = std::min(min_seen, header.versions(k));
    }
  }
  return min_seen == INT64_MAX ? 0 : min_seen;
}

absl::StatusOr<int> PsClient::Push(int64_t step) {
  std::vector<OutgoingFrame> requests(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    PushRequest header;
    header.set_worker(worker_);
    header.set_step(step);
    for (int i : shard_variables_[s]) {
      const Variable& var = (*variables_)[i];
      DescribeTensor(var, var.grad, header.add_tensors());
      requests[s].chunks.push_back(ChunkOf(var.grad));
    }
    header.SerializeToString(&requests[s].header);
  }
  std::vector<IncomingFrame> responses;
  PSTRAIN_RETURN_IF_ERROR(FanOut("Push", std::move(requests), RpcOptions(), &responses, /*all_shards=*/false));
  int dropped = 0;
  for (int s = 0; s < num_shards(); ++s) {
    if (shard_variables_[s].empty()) continue;
    PushResponse header;
    if (responses[s].ParseHeader(&header)) dropped += header.dropped_stale();
  }
  return dropped;
}

absl::Status PsClient::Heartbeat(int64_t step) {
  std::vector<OutgoingFrame> requests(num_shards());
  HeartbeatRequest header;
  header.set_worker(worker_);
  header.set_step(step);
  for (auto& r : requests) header.SerializeToString(&r.header);
  CallOptions options;
  options.deadline = absl::Now() + absl::Seconds(config_.timeouts().heartbeat_seconds() * 2 + 1);
  return FanOut("Heartbeat", std::move(requests), options, nullptr, /*all_shards=*/true);
}

absl::Status PsClient::Done(const WorkerReport& report) {
  std::vector<OutgoingFrame> requests(num_shards());
  DoneRequest header;
  *header.mutable_report() = report;
  for (auto& r : requests) header.SerializeToString(&r.header);
  return FanOut("Done", std::move(requests), RpcOptions(), nullptr, /*all_shards=*/true);
}

absl::StatusOr<std::vector<StatsResponse>> PsClient::Stats() {
  std::vector<OutgoingFrame> requests(num_shards());
  for (auto& r : requests) StatsRequest().SerializeToString(&r.header);
  std::vector<IncomingFrame> responses;
  PSTRAIN_RETURN_IF_ERROR(FanOut("Stats", std::move(requests), RpcOptions(), &responses, /*all_shards=*/true));
  std::vector<StatsResponse> stats(num_shards());
  for (int s = 0; s < num_shards(); ++s) {
    if (!responses[s].ParseHeader(&stats[s])) return absl::InternalError("stats: malformed response");
  }
  return stats;
}

}  // namespace pstrain
