// A PS shard served over the in-process transport, and a small client that
// builds frames by hand (so tests can also build malformed ones).
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tensor.h"
#include "common/transport/inproc/inproc_transport.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"
#include "ps/ps_service.h"
#include "ps/shard/shard.h"

namespace pstrain::ps_testing {

struct Var {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

inline std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

inline std::vector<float> BytesToFloats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  std::memcpy(v.data(), s.data(), v.size() * sizeof(float));
  return v;
}

inline void AddTensor(TensorHeader* h, const std::string& name, const Shape& shape, uint64_t num_bytes,
                      WireDType dtype = DT_FLOAT32) {
  h->set_name(name);
  for (int64_t d : shape) h->add_shape(d);
  h->set_dtype(dtype);
  h->set_num_bytes(num_bytes);
}

// Payload chunks: `payload` cut into pieces of `sizes` (repeating the
// pattern; empty: one chunk).
inline std::vector<ConstChunk> Chunks(const std::string& payload, const std::vector<size_t>& sizes) {
  auto owner = std::make_shared<std::string>(payload);
  std::vector<ConstChunk> chunks;
  if (sizes.empty()) {
    if (!owner->empty()) chunks.push_back({owner->data(), owner->size(), owner});
    return chunks;
  }
  size_t at = 0, i = 0;
  while (at < owner->size()) {
    size_t take = std::min(sizes[i++ % sizes.size()], owner->size() - at);
    chunks.push_back({owner->data() + at, take, owner});
    at += take;
  }
  return chunks;
}

struct PullResult {
  absl::Status status;
  std::vector<std::string> names;
  std::vector<int64_t> versions;
  std::map<std::string, std::vector<float>> values;
  std::string header;   // raw response header bytes
  std::string payload;  // raw response payload bytes
};

inline PullResult DecodePull(absl::Status status, IncomingFrame& frame) {
  PullResult r;
  r.status = std::move(status);
  if (!r.status.ok()) return r;
  PullResponse header;
  if (!frame.ParseHeader(&header)) {
    r.status = absl::InternalError("test: pull response header does not parse");
    return r;
  }
  r.header = frame.header();
  if (header.versions_size() != header.tensors_size()) {
    r.status = absl::InternalError("test: versions and tensors differ in count");
    return r;
  }
  uint64_t declared = 0;
  for (const TensorHeader& t : header.tensors()) declared += t.num_bytes();
  if (declared != frame.payload_bytes()) {
    r.status = absl::InternalError("test: pull payload size does not match its headers");
    return r;
  }
  for (int i = 0; i < header.tensors_size(); ++i) {
    const TensorHeader& t = header.tensors(i);
    std::string bytes(t.num_bytes(), '\0');
    absl::Status s = frame.Read(bytes.data(), bytes.size());
    if (!s.ok()) {
      r.status = s;
      return r;
    }
    r.payload += bytes;
    r.names.push_back(t.name());
    r.versions.push_back(header.versions(i));
    r.values[t.name()] = BytesToFloats(bytes);
  }
  return r;
}

// A pull that may answer later.
struct PendingPull {
  absl::Notification done;
  PullResult result;
  std::atomic<int> completions{0};
};

class PsHarness {
 public:
  explicit PsHarness(const PsShardOptions& options, const std::string& address = "ps0:1")
      : PsHarness(options, nullptr, address) {}

  // Served by `transport` (not owned; e.g. grpc on "127.0.0.1:0", reached
  // as localhost:<port>), or in-process when null.
  PsHarness(const PsShardOptions& options, Transport* transport, const std::string& address) {
    absl::StatusOr<std::unique_ptr<PsShard>> shard = PsShard::Create(options);
    EXPECT_TRUE(shard.ok()) << shard.status();
    if (!shard.ok()) return;
    shard_ = *std::move(shard);
    service_ = std::make_unique<PsService>(shard_.get());
    Transport* serving = transport != nullptr ? transport : &transport_;
    absl::StatusOr<std::unique_ptr<Server>> server = serving->Serve(address, service_.get());
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return;
    server_ = *std::move(server);
    connect_address_ = transport != nullptr ? "localhost:" + std::to_string(server_->port()) : address;
    absl::StatusOr<std::unique_ptr<Channel>> channel = serving->Connect(connect_address_);
    EXPECT_TRUE(channel.ok()) << channel.status();
    channel_ = *std::move(channel);
  }

  // Where clients reach the shard.
  const std::string& address() const { return connect_address_; }
  // Makes every call below go through `channel` (e.g. one of another
  // client's credentials); returns the one used so far.
  std::unique_ptr<Channel> SwapChannel(std::unique_ptr<Channel> channel) {
    std::swap(channel, channel_);
    return channel;
  }

  ~PsHarness() {
    // Stop taking calls, then let the shard's destructor answer (cancel)
    // parked pulls.
    if (server_) server_->Shutdown(absl::ZeroDuration());
    shard_.reset();
  }

  PsShard* shard() { return shard_.get(); }
  Channel* channel() { return channel_.get(); }
  bool ok() const { return channel_ != nullptr; }

  absl::Status Call(const std::string& method, OutgoingFrame request, IncomingFrame* response) {
    CallOptions options;
    options.deadline = absl::Now() + absl::Seconds(20);
    return channel_->CallSync(method, std::move(request), options, response);
  }

  absl::StatusOr<InitResponse> Init(const std::vector<Var>& vars, int worker = 0, int64_t total_steps = 0) {
    InitRequest header;
    header.set_worker(worker);
    header.set_total_steps(total_steps);
    std::string payload;
    for (const Var& v : vars) {
      AddTensor(header.add_tensors(), v.name, v.shape, v.values.size() * sizeof(float));
      payload += FloatBytes(v.values);
    }
    return InitRaw(header, payload);
  }

  absl::StatusOr<InitResponse> InitRaw(const InitRequest& header, const std::string& payload) {
    OutgoingFrame request = OutgoingFrame::FromHeader(header);
    request.chunks = Chunks(payload, {});
    IncomingFrame response;
    absl::Status s = Call("Init", std::move(request), &response);
    if (!s.ok()) return s;
    InitResponse r;
    if (!response.ParseHeader(&r)) return absl::InternalError("test: bad init response");
    return r;
  }

  static PullRequest PullHeader(const std::vector<std::string>& names, int64_t min_version, int64_t timeout_ms,
                                int worker) {
    PullRequest header;
    header.set_worker(worker);
    for (const std::string& n : names) header.add_names(n);
    header.set_min_version(min_version);
    header.set_timeout_ms(timeout_ms);
    return header;
  }

  PullResult Pull(const std::vector<std::string>& names = {}, int64_t min_version = 0, int64_t timeout_ms = 0,
                  int worker = 0) {
    IncomingFrame response;
    absl::Status s =
        Call("Pull", OutgoingFrame::FromHeader(PullHeader(names, min_version, timeout_ms, worker)), &response);
    return DecodePull(s, response);
  }

  // A pull of any request (generations, incarnations, ...).
  PullResult PullRaw(const PullRequest& header) {
    IncomingFrame response;
    absl::Status s = Call("Pull", OutgoingFrame::FromHeader(header), &response);
    return DecodePull(s, response);
  }

  // Starts a pull; the result lands in the returned object.
  std::shared_ptr<PendingPull> PullAsync(const std::vector<std::string>& names, int64_t min_version, int64_t timeout_ms,
                                         int worker = 0) {
    return PullAsyncRaw(PullHeader(names, min_version, timeout_ms, worker));
  }
  std::shared_ptr<PendingPull> PullAsyncRaw(const PullRequest& header) {
    auto pending = std::make_shared<PendingPull>();
    CallOptions options;
    options.deadline = absl::Now() + absl::Seconds(60);
    channel_->Call("Pull", OutgoingFrame::FromHeader(header), options, [pending](absl::Status s, IncomingFrame f) {
      if (pending->completions.fetch_add(1) == 0) {
        pending->result = DecodePull(std::move(s), f);
        pending->done.Notify();
      }
    });
    return pending;
  }

  // Every variable (sorted by name) with versions, as raw bytes: equal
  // snapshots mean the shard's visible state did not change.
  std::string Snapshot() {
    PullResult r = Pull();
    EXPECT_TRUE(r.status.ok()) << r.status;
    return r.header + "|" + r.payload;
  }

  absl::StatusOr<PushResponse> PushRaw(const PushRequest& header, const std::string& payload,
                                       const std::vector<size_t>& chunk_sizes = {}) {
    OutgoingFrame request = OutgoingFrame::FromHeader(header);
    request.chunks = Chunks(payload, chunk_sizes);
    IncomingFrame response;
    absl::Status s = Call("Push", std::move(request), &response);
    if (!s.ok()) return s;
    PushResponse r;
    if (!response.ParseHeader(&r)) return absl::InternalError("test: bad push response");
    return r;
  }

  // A well-formed push of `grads` (name -> values; shapes from `vars`).
  absl::StatusOr<PushResponse> Push(int worker, int64_t step, const std::vector<Var>& grads,
                                    const std::vector<size_t>& chunk_sizes = {}) {
    PushRequest header;
    header.set_worker(worker);
    header.set_step(step);
    std::string payload;
    for (const Var& g : grads) {
      AddTensor(header.add_tensors(), g.name, g.shape, g.values.size() * sizeof(float));
      payload += FloatBytes(g.values);
    }
    return PushRaw(header, payload, chunk_sizes);
  }

  absl::Status Heartbeat(int worker, int64_t step = 0, bool paused = false) {
    HeartbeatRequest header;
    header.set_worker(worker);
    header.set_step(step);
    header.set_paused(paused);
    return Call("Heartbeat", OutgoingFrame::FromHeader(header), nullptr);
  }

  // A heartbeat of `worker` carrying `layout` (the chief's, when it tunes);
  // the shard's answer: the chief's latest layout.
  absl::StatusOr<ChiefLayout> HeartbeatWithLayout(int worker, const ChiefLayout& layout) {
    HeartbeatRequest header;
    header.set_worker(worker);
    *header.mutable_layout() = layout;
    IncomingFrame response;
    absl::Status s = Call("Heartbeat", OutgoingFrame::FromHeader(header), &response);
    if (!s.ok()) return s;
    HeartbeatResponse answer;
    if (!response.ParseHeader(&answer)) return absl::InternalError("malformed heartbeat response");
    return answer.layout();
  }

  absl::Status Done(int worker, int64_t steps = 10, double images_per_sec = 100.0) {
    DoneRequest header;
    WorkerReport* report = header.mutable_report();
    report->set_worker(worker);
    report->set_steps(steps);
    report->set_images_per_sec(images_per_sec);
    report->set_final_loss(0.5 + worker);
    return Call("Done", OutgoingFrame::FromHeader(header), nullptr);
  }

  absl::StatusOr<StatsResponse> Stats() {
    IncomingFrame response;
    absl::Status s = Call("Stats", OutgoingFrame::FromHeader(StatsRequest()), &response);
    if (!s.ok()) return s;
    StatsResponse r;
    if (!response.ParseHeader(&r)) return absl::InternalError("test: bad stats response");
    return r;
  }

 private:
  InprocTransport transport_;  // declared first: outlives everything below
  std::unique_ptr<PsShard> shard_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Channel> channel_;
  std::string connect_address_;
};

// Polls `pred` until it holds or `timeout` passes.
template <typename Pred>
bool WaitUntil(Pred pred, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

inline PsShardOptions SgdOptions(int num_workers, const std::string& consistency, float lr,
                                 int replicas_to_aggregate = 0) {
  PsShardOptions o;
  o.num_workers = num_workers;
  o.consistency = consistency;
  o.replicas_to_aggregate = replicas_to_aggregate;
  o.optimizer.set_name("sgd");
  o.optimizer.set_learning_rate(lr);
  o.optimizer.set_weight_decay(0.0f);
  return o;
}

}  // namespace pstrain::ps_testing
