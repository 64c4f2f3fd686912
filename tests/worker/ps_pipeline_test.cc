// PsPipeline's scheduling (worker/ps_pipeline.h) with real parts: a real
// PsClient over a real InprocTransport whose two "shards" are a test handler
// that records every request and keeps its Responder, so each test decides
// when every push is acknowledged and every pull answered; the variables are
// a ReplicaSet of a small MLP (1 or 2 replicas). The tests call the hooks
// and waits by hand, as a model does (backward: last variable first).
//
// Deterministic: every answer is given from the test thread, and the
// in-process transport runs the pipeline's completion (and the pushes and
// pulls it issues) on that thread before the answer returns, so the requests
// arrive in one order whatever the machine. Only FinishStep and the
// forward's waits block; they run on their own threads, and the tests wait
// for them with generous deadlines. Where a test checks that a wait still
// blocks, it gives the waiter a short pause to return wrongly: a correct
// pipeline passes whatever the timing.
#include "worker/ps_pipeline.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/placement.h"
#include "common/ps_rpc.h"
#include "common/transport/inproc/inproc_transport.h"
#include "device/timed_copy_engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/config.pb.h"
#include "proto/ps.pb.h"
#include "tests/util/process_test_util.h"
#include "worker/ps_client.h"
#include "worker/replica_set.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAreArray;

constexpr int kShards = 2;
constexpr int64_t kMiB = 1 << 20;
// Slices of 1.25 MiB: PsClient's RPC batches (about 2 MiB of whole parts)
// then hold one slice each, so every shard has several batches.
constexpr int64_t kPartitionBytes = kMiB + kMiB / 4;
// One batch fits, two do not.
constexpr int64_t kOneBatchWindow = kMiB + kMiB / 2;
// Two batches fit, three do not.
constexpr int64_t kTwoBatchWindow = 2 * kMiB + 6 * kMiB / 10;
// How long a waiter that should block gets to return wrongly.
constexpr absl::Duration kPause = absl::Milliseconds(50);
// How long anything that should return may take (a broken pipeline blocks).
constexpr absl::Duration kGenerous = absl::Seconds(30);

// flatten -> dense 512 -> dense 1280 -> dense 512 -> logits 10 on [1, 32, 40]
// inputs: three 2.5 MiB weights (cut in two slices each), a 20 KiB one and
// four biases. Variables 0..7: hidden1 weights, bias, hidden2 weights, bias,
// hidden3 weights, bias, logits weights, bias.
ModelConfig PipelineModel() {
  ModelConfig config;
  config.set_name("mlp");
  for (int units : {512, 1280, 512}) config.add_hidden_units(units);
  for (int d : {1, 32, 40}) config.add_input_shape(d);
  config.set_num_classes(10);
  return config;
}
constexpr int kVariables = 8;

// Balanced placement over 2 shards puts the six slices alternately on shard
// 0 and 1, the logits weights on shard 0 and the biases on shard 1; PsClient
// cuts each shard's parts (in model order) into these six RPC batches:
//   0: shard 0, hidden1 weights slice 0       (priority 0)
//   1: shard 0, hidden2 weights slice 0       (priority 2)
//   2: shard 0, hidden3 weights slice 0, logits weights        (priority 4)
//   3: shard 1, hidden1 weights slice 1, hidden1 bias          (priority 0)
//   4: shard 1, hidden2 weights slice 1, hidden2 bias          (priority 2)
//   5: shard 1, hidden3 weights slice 1, hidden3 bias, logits bias (4)
// as indices into PsClient::parts() (model order: 0 hidden1/slice_0, 1
// hidden1/slice_1, 2 bias1, 3 hidden2/slice_0, 4 hidden2/slice_1, 5 bias2,
// 6 hidden3/slice_0, 7 hidden3/slice_1, 8 bias3, 9 logits weights, 10 logits
// bias).
const std::vector<std::vector<int>> kBatchParts = {{0}, {3}, {6, 9}, {1, 2}, {4, 5}, {7, 8, 10}};
const std::vector<int> kBatchShard = {0, 0, 0, 1, 1, 1};
const std::vector<std::vector<int>> kBatchVariables = {{0}, {2}, {4, 6}, {0, 1}, {2, 3}, {4, 5, 7}};
constexpr int kBatches = 6;

// `pushes_per_shard` 0 (no limit) unless a test is about that limit.
ExperimentConfig PipelineConfig(const std::string& consistency, int64_t window_bytes, int pushes_per_shard) {
  ExperimentConfig config;
  *config.mutable_model() = PipelineModel();
  config.set_consistency(consistency);
  config.set_placement("balanced");
  config.set_partition_bytes(kPartitionBytes);
  config.mutable_ps_scheduling()->set_pipeline(true);
  config.mutable_ps_scheduling()->set_window_bytes(window_bytes);
  config.mutable_ps_scheduling()->set_pushes_per_shard(pushes_per_shard);
  for (int s = 0; s < kShards; ++s) config.mutable_cluster()->add_ps_hosts(absl::StrCat("ps", s, ":1"));
  // No RPC deadline may pass while a test holds an answer back.
  config.mutable_timeouts()->set_rpc_seconds(3600);
  config.mutable_timeouts()->set_sync_step_seconds(3600);
  return config;
}

// The gradient replica r computes for element i of variable v: small
// integers, so the mean of two replicas is exact in float.
float Gradient(int replica, int variable, int64_t i) {
  return static_cast<float>((replica + 1) * (i % 13 - 6) + variable);
}

// The value a shard answers for element i of part p at `version` (exact in
// float).
float PulledValue(int part, int64_t i, int64_t version) {
  return static_cast<float>(version * 100 + part) + static_cast<float>(i % 64) / 64.0f;
}

// One request a shard received.
struct Request {
  int shard = 0;
  std::string method;
  int batch = -1;  // Push and Pull: the RPC batch its tensor names make up
  std::vector<std::string> names;
  int64_t step = 0;                           // Push: PushRequest.step (the version it was computed on)
  int64_t local_step = 0;                     // Push and Pull
  int64_t min_version = 0;                    // Pull
  std::vector<std::vector<float>> gradients;  // Push: each tensor's payload, copied on arrival
  Responder respond;                          // until answered
  bool answered = false;
};

// Every request of every shard, in arrival order; the test answers them.
class RequestLog {
 public:
  // Per batch its tensor names, in the order PsClient sends them.
  explicit RequestLog(std::vector<std::vector<std::string>> batch_names) : batch_names_(std::move(batch_names)) {}

  // Runs on the thread that issued the request (the in-process transport
  // hands it over inline), after the request is logged.
  void SetOnRequest(std::function<void(const Request&)> on_request) {
    absl::MutexLock lock(&mu_);
    on_request_ = std::move(on_request);
  }
  // Per batch its bytes: each push's arrival then checks the window.
  void WatchWindow(std::vector<int64_t> batch_bytes, int64_t window_bytes) {
    absl::MutexLock lock(&mu_);
    batch_bytes_ = std::move(batch_bytes);
    window_bytes_ = window_bytes;
  }

  void Record(int shard, std::string_view method, IncomingFrame frame, Responder respond) {
    Request r;
    r.shard = shard;
    r.method = std::string(method);
    r.respond = std::move(respond);
    if (method == ps_rpc::kPush) {
      PushRequest header;
      EXPECT_TRUE(frame.ParseHeader(&header));
      r.step = header.step();
      r.local_step = header.local_step();
      for (const TensorHeader& h : header.tensors()) {
        r.names.push_back(h.name());
        EXPECT_EQ(h.dtype(), DT_FLOAT32);
        std::vector<float> gradient(h.num_bytes() / sizeof(float));
        EXPECT_TRUE(frame.Read(gradient.data(), h.num_bytes()).ok());
        r.gradients.push_back(std::move(gradient));
      }
    } else if (method == ps_rpc::kPull) {
      PullRequest header;
      EXPECT_TRUE(frame.ParseHeader(&header));
      r.names.assign(header.names().begin(), header.names().end());
      r.min_version = header.min_version();
      r.local_step = header.local_step();
    }
    for (size_t b = 0; b < batch_names_.size(); ++b) {
      if (r.names == batch_names_[b]) r.batch = static_cast<int>(b);
    }
    if (method == ps_rpc::kPush || method == ps_rpc::kPull) {
      EXPECT_GE(r.batch, 0) << method << " of tensors that make up no batch";
      EXPECT_EQ(r.batch < 0 ? -1 : kBatchShard[r.batch], shard) << method << " of batch " << r.batch;
    }
    std::function<void(const Request&)> on_request;
    Request copy;
    {
      absl::MutexLock lock(&mu_);
      if (r.method == ps_rpc::kPush && !batch_bytes_.empty()) CheckWindowLocked(r.batch);
      requests_.push_back(std::move(r));
      on_request = on_request_;
      if (on_request) {
        copy = requests_.back();
        copy.respond = nullptr;
      }
    }
    if (on_request) on_request(copy);
  }

  // The batches of every request of `method` so far, in arrival order.
  std::vector<int> Batches(std::string_view method) const {
    absl::MutexLock lock(&mu_);
    std::vector<int> batches;
    for (const Request& r : requests_) {
      if (r.method == method) batches.push_back(r.batch);
    }
    return batches;
  }
  std::vector<int> Pushes() const { return Batches(ps_rpc::kPush); }
  std::vector<int> Pulls() const { return Batches(ps_rpc::kPull); }
  // The batches of the `method` requests not answered yet, in arrival order.
  std::vector<int> Unanswered(std::string_view method) const {
    absl::MutexLock lock(&mu_);
    std::vector<int> batches;
    for (const Request& r : requests_) {
      if (r.method == method && !r.answered) batches.push_back(r.batch);
    }
    return batches;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return requests_.size();
  }
  // A copy of request `i` (without its responder).
  Request At(size_t i) const {
    absl::MutexLock lock(&mu_);
    Request r = requests_.at(i);
    r.respond = nullptr;
    return r;
  }
  // The unanswered `method` request of `batch` (exactly one), copied.
  std::optional<Request> Pending(std::string_view method, int batch) {
    absl::MutexLock lock(&mu_);
    const Request* found = FindLocked(method, batch);
    if (found == nullptr) return std::nullopt;
    Request r = *found;
    r.respond = nullptr;
    return r;
  }
  // Answers the unanswered `method` request of `batch`; false if none.
  bool Answer(std::string_view method, int batch, absl::Status status, OutgoingFrame response) {
    Responder respond;
    {
      absl::MutexLock lock(&mu_);
      Request* r = FindLocked(method, batch);
      if (r == nullptr) return false;
      r->answered = true;
      respond = std::move(r->respond);
    }
    // Outside the lock: the pipeline's completion runs (and sends) inline.
    respond(std::move(status), std::move(response));
    return true;
  }
  // The most pushes in flight at once, and window violations seen.
  int max_pushes_in_flight() const {
    absl::MutexLock lock(&mu_);
    return max_in_flight_;
  }
  std::vector<std::string> window_violations() const {
    absl::MutexLock lock(&mu_);
    return violations_;
  }
  // Drops every unanswered responder (their callers never hear back).
  void DropUnanswered() {
    absl::MutexLock lock(&mu_);
    for (Request& r : requests_) r.respond = nullptr;
  }

 private:
  Request* FindLocked(std::string_view method, int batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Request* found = nullptr;
    for (Request& r : requests_) {
      if (r.method != method || r.batch != batch || r.answered) continue;
      EXPECT_EQ(found, nullptr) << "two unanswered " << method << "s of batch " << batch;
      found = &r;
    }
    return found;
  }
  // A push of `batch` arrives: the pushes then in flight (unanswered, this
  // one included) hold at most window_bytes_, or it goes alone.
  void CheckWindowLocked(int batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t bytes = batch_bytes_.at(batch);
    int count = 1;
    std::string batches = absl::StrCat(batch);
    for (const Request& r : requests_) {
      if (r.method != ps_rpc::kPush || r.answered) continue;
      bytes += batch_bytes_.at(r.batch);
      ++count;
      absl::StrAppend(&batches, " ", r.batch);
    }
    max_in_flight_ = std::max(max_in_flight_, count);
    if (count > 1 && window_bytes_ > 0 && bytes > window_bytes_) {
      violations_.push_back(absl::StrCat("batches ", batches, " in flight: ", bytes, " bytes"));
    }
  }

  const std::vector<std::vector<std::string>> batch_names_;
  mutable absl::Mutex mu_;
  std::vector<Request> requests_ ABSL_GUARDED_BY(mu_);
  std::function<void(const Request&)> on_request_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> batch_bytes_ ABSL_GUARDED_BY(mu_);
  int64_t window_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int max_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
};

// A PS shard that only records: the test answers.
class RecordingShard : public Handler {
 public:
  RecordingShard(int shard, RequestLog* log) : shard_(shard), log_(log) {}
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    log_->Record(shard_, method, std::move(request), std::move(respond));
  }

 private:
  const int shard_;
  RequestLog* const log_;
};

// Runs `fn` (a call that may block) on its own thread. Should it still be
// blocked when the test ends (a failed assertion, or a broken pipeline),
// `release` answers what the shards hold back; if that does not release it
// either, the run is failed here rather than hung.
class Background {
 public:
  Background(std::string what, std::function<void()> fn, std::function<void()> release = nullptr)
      : what_(std::move(what)), release_(std::move(release)), thread_([this, fn = std::move(fn)] {
          fn();
          returned_.Notify();
        }) {}
  ~Background() {
    if (!returned_.HasBeenNotified() && release_) release_();
    if (!returned_.WaitForNotificationWithTimeout(kGenerous)) {
      std::cerr << what_ << " never returned" << std::endl;
      std::abort();
    }
    thread_.join();
  }
  // Whether it is still blocked after a short pause.
  bool StillBlocked() { return !returned_.WaitForNotificationWithTimeout(kPause); }
  // Whether it returns within a generous deadline.
  bool Returns() { return returned_.WaitForNotificationWithTimeout(kGenerous); }

 private:
  const std::string what_;
  const std::function<void()> release_;
  absl::Notification returned_;
  std::thread thread_;
};

// The pipeline of one worker with `replicas` replicas over two recording
// shards.
class Harness {
 public:
  Harness(const std::string& consistency, int64_t window_bytes, int replicas, int pushes_per_shard = 0)
      : config_(PipelineConfig(consistency, window_bytes, pushes_per_shard)),
        window_bytes_(window_bytes),
        num_replicas_(replicas) {}

  // Builds everything; fails the test if the layout is not the one above.
  // `options`: the replicas' (e.g. CPU replicas with host mirrors, standing
  // for GPU replicas).
  void Build(const ReplicaOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<ReplicaSet>> made = ReplicaSet::Create(PipelineModel(), num_replicas_, options);
    ASSERT_TRUE(made.ok()) << made.status();
    replicas_ = std::move(*made);
    replicas_->UploadValuesOnWait();  // as the strategy does (mirrored replicas only)
    replicas_->InitializeVariables(42);
    replicas_->BroadcastValues(0);
    std::vector<Variable>& variables = replicas_->variables(0);
    ASSERT_EQ(variables.size(), static_cast<size_t>(kVariables));
    std::vector<VariableShape> shapes;
    for (const Variable& v : variables) shapes.push_back({v.name, v.value.shape()});
    absl::StatusOr<std::vector<VariablePart>> parts =
        PlanPlacement(shapes, kShards, config_.placement(), config_.partition_bytes());
    ASSERT_TRUE(parts.ok()) << parts.status();
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        PsClient::Create(config_, /*worker_index=*/0, &transport_, &variables, std::move(*parts));
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);

    // The layout the tests are written for.
    const std::vector<VariablePart>& all = client_->parts();
    ASSERT_EQ(all.size(), 11u);
    ASSERT_EQ(client_->num_push_batches(), kBatches);
    std::vector<std::vector<std::string>> names(kBatches);
    for (int b = 0; b < kBatches; ++b) {
      int64_t bytes = 0;
      for (int p : kBatchParts[b]) {
        ASSERT_EQ(all[p].shard, kBatchShard[b]) << all[p].name;
        names[b].push_back(all[p].name);
        bytes += all[p].count * static_cast<int64_t>(sizeof(float));
      }
      ASSERT_EQ(client_->Batch(b).variables, kBatchVariables[b]) << "batch " << b;
      ASSERT_EQ(client_->Batch(b).bytes, bytes) << "batch " << b;
      ASSERT_EQ(client_->Batch(b).shard, kBatchShard[b]) << "batch " << b;
      batch_bytes_.push_back(bytes);
    }
    // The windows' premises: one slice batch is above 1 MiB; two fit in
    // kTwoBatchWindow, three do not; none fits twice in kOneBatchWindow.
    const int64_t largest = *std::max_element(batch_bytes_.begin(), batch_bytes_.end());
    const int64_t smallest = *std::min_element(batch_bytes_.begin(), batch_bytes_.end());
    ASSERT_GT(2 * smallest, kOneBatchWindow);
    ASSERT_LE(largest, kOneBatchWindow);
    ASSERT_LE(2 * largest, kTwoBatchWindow);
    ASSERT_GT(3 * smallest, kTwoBatchWindow);

    log_ = std::make_unique<RequestLog>(std::move(names));
    log_->WatchWindow(batch_bytes_, window_bytes_);
    for (int s = 0; s < kShards; ++s) {
      shards_.push_back(std::make_unique<RecordingShard>(s, log_.get()));
      absl::StatusOr<std::unique_ptr<Server>> server =
          transport_.Serve(config_.cluster().ps_hosts(s), shards_[s].get());
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
    }
    pipeline_ = std::make_unique<PsPipeline>(client_.get(), replicas_.get(), config_, /*timeline=*/nullptr);
    for (int r = 0; r < num_replicas_; ++r) SetGradients(r);
  }

  ~Harness() {
    // Answers held back are never given: nothing calls into the pipeline
    // once it is gone.
    if (log_ != nullptr) log_->DropUnanswered();
  }

  PsPipeline& pipeline() { return *pipeline_; }
  RequestLog& log() { return *log_; }
  PsClient& client() { return *client_; }
  std::vector<Variable>& variables(int r) { return replicas_->variables(r); }
  int64_t batch_bytes(int b) const { return batch_bytes_[b]; }

  // Runs `fn` (a blocking call of the pipeline) on its own thread.
  std::unique_ptr<Background> Start(std::string what, std::function<void()> fn) {
    return std::make_unique<Background>(std::move(what), std::move(fn), Releaser());
  }
  // The pipeline's blocking calls where they should return at once: a
  // broken pipeline fails the test instead of hanging it.
  absl::StatusOr<int> FinishStep() {
    absl::StatusOr<int> result;
    Background call(
        "FinishStep", [&] { result = pipeline_->FinishStep(); }, Releaser());
    EXPECT_TRUE(call.Returns()) << "FinishStep blocked";
    return result;
  }
  absl::StatusOr<int64_t> WaitForPulls() {
    absl::StatusOr<int64_t> result;
    Background call(
        "WaitForPulls", [&] { result = pipeline_->WaitForPulls(); }, Releaser());
    EXPECT_TRUE(call.Returns()) << "WaitForPulls blocked";
    return result;
  }
  void Wait(int r, int variable) {
    Background call(
        absl::StrCat("WaitFor(", r, ")(", variable, ")"), [&] { pipeline_->WaitFor(r)(variable); }, Releaser());
    EXPECT_TRUE(call.Returns()) << "replica " << r << " blocked waiting for variable " << variable;
  }
  // Fails every push and pull still unanswered (for a call left blocked).
  std::function<void()> Releaser() {
    return [this] {
      for (int round = 0; round < 2 * kBatches; ++round) {
        bool any = false;
        for (std::string_view method : {ps_rpc::kPush, ps_rpc::kPull}) {
          for (int b : log_->Unanswered(method)) {
            any = log_->Answer(method, b, absl::CancelledError("the test ended"), {}) || any;
          }
        }
        if (!any) return;
      }
    };
  }

  // Replica r's gradients: Gradient(r, v, i).
  void SetGradients(int r) {
    std::vector<Variable>& vars = replicas_->variables(r);
    for (int v = 0; v < kVariables; ++v) {
      float* g = vars[v].grad.data();
      for (int64_t i = 0; i < vars[v].grad.num_elements(); ++i) g[i] = Gradient(r, v, i);
    }
  }

  // Replica r finalises `variable`'s gradient.
  void Report(int r, int variable) { pipeline_->HookFor(r)(variable); }
  // Replica r's backward: every variable, last first.
  void Backward(int r) {
    for (int v = kVariables - 1; v >= 0; --v) Report(r, v);
  }

  // Acknowledges the push of `batch` (false if none is unanswered).
  bool Ack(int batch, int dropped = 0) {
    PushResponse response;
    response.set_accepted(static_cast<int>(kBatchParts[batch].size()));
    response.set_dropped_stale(dropped);
    return log_->Answer(ps_rpc::kPush, batch, absl::OkStatus(), OutgoingFrame::FromHeader(response));
  }
  bool FailPush(int batch, absl::Status status) { return log_->Answer(ps_rpc::kPush, batch, std::move(status), {}); }
  // Answers the pull of `batch` as a shard at `version` would, the values
  // PulledValue(part, i, version).
  bool AnswerPull(int batch, int64_t version) {
    return log_->Answer(ps_rpc::kPull, batch, absl::OkStatus(), PullAnswer(batch, version));
  }
  // That answer.
  OutgoingFrame PullAnswer(int batch, int64_t version) {
    const std::vector<VariablePart>& parts = client_->parts();
    PullResponse header;
    OutgoingFrame response;
    for (int p : kBatchParts[batch]) {
      const VariablePart& part = parts[p];
      TensorHeader* h = header.add_tensors();
      h->set_name(part.name);
      for (int64_t d : part.shape) h->add_shape(d);
      h->set_dtype(DT_FLOAT32);
      h->set_num_bytes(part.count * sizeof(float));
      header.add_versions(version);
      auto values = std::make_shared<std::vector<float>>(part.count);
      for (int64_t i = 0; i < part.count; ++i) (*values)[i] = PulledValue(p, i, version);
      response.chunks.push_back({values->data(), values->size() * sizeof(float), values});
    }
    header.set_generation(client_->generation());
    header.SerializeToString(&response.header);
    return response;
  }
  bool FailPull(int batch, absl::Status status) { return log_->Answer(ps_rpc::kPull, batch, std::move(status), {}); }

  // Whether replica r holds the values AnswerPull(b, version) brought for
  // every part of batch b.
  bool HoldsPulled(int r, int batch, int64_t version) {
    const std::vector<VariablePart>& parts = client_->parts();
    for (int p : kBatchParts[batch]) {
      const float* value = replicas_->variables(r)[parts[p].variable].value.data() + parts[p].offset;
      for (int64_t i = 0; i < parts[p].count; ++i) {
        if (value[i] != PulledValue(p, i, version)) return false;
      }
    }
    return true;
  }
  // Every replica's values, to compare later (Changed).
  using Snapshot = std::vector<std::vector<std::vector<float>>>;  // [replica][variable]
  Snapshot Values() {
    std::vector<std::vector<std::vector<float>>> values(num_replicas_);
    for (int r = 0; r < num_replicas_; ++r) {
      for (const Variable& v : replicas_->variables(r)) {
        values[r].emplace_back(v.value.data(), v.value.data() + v.value.num_elements());
      }
    }
    return values;
  }
  // "replica r variable v" for every variable whose values differ from
  // `before`'s.
  std::vector<std::string> Changed(const Snapshot& before) {
    const Snapshot now = Values();
    std::vector<std::string> changed;
    for (int r = 0; r < num_replicas_; ++r) {
      for (int v = 0; v < kVariables; ++v) {
        if (now[r][v] != before[r][v]) changed.push_back(absl::StrCat("replica ", r, " variable ", v));
      }
    }
    return changed;
  }
  std::vector<float> Value(int r, int variable) {
    const Tensor& t = replicas_->variables(r)[variable].value;
    return std::vector<float>(t.data(), t.data() + t.num_elements());
  }
  // What replica r's model reads (with host mirrors: the "device" copy).
  std::vector<float> DeviceValue(int r, int variable) {
    const Tensor& t = replicas_->device_variables(r)[variable].value;
    return std::vector<float>(t.data(), t.data() + t.num_elements());
  }

 private:
  const ExperimentConfig config_;
  const int64_t window_bytes_;
  const int num_replicas_;
  InprocTransport transport_;
  std::unique_ptr<RequestLog> log_;
  std::vector<std::unique_ptr<RecordingShard>> shards_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::unique_ptr<ReplicaSet> replicas_;
  std::vector<int64_t> batch_bytes_;
  std::unique_ptr<PsClient> client_;
  std::unique_ptr<PsPipeline> pipeline_;
};

// ------------------------------------------------------------------ priority

// Backward reports variables 7..0: batches become ready in the order 2, 5
// (variable 4), 1, 4 (variable 2), 0, 3 (variable 0). With one batch in
// flight at a time, each acknowledgement sends the ready batch holding the
// lowest variable index (ties: the lower batch), not the one ready first.
TEST(PsPipelinePriorityTest, EachAcknowledgementSendsTheReadyBatchOfTheLowestVariable) {
  Harness h("sync", kOneBatchWindow, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(7);
  h.pipeline().BeginStep(7);
  for (int v = kVariables - 1; v >= 4; --v) h.Report(0, v);
  // Variable 4 completes batches 2 and 5: only 2 goes, the window is full.
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2));
  for (int v = 3; v >= 0; --v) h.Report(0, v);
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2));  // ready: 5, 1, 4, 0, 3

  // In the order the next forward needs them: 0 and 3 (variable 0), 1 and 4
  // (variable 2), then 5; the order they became ready was 5, 1, 4, 0, 3.
  const std::vector<int> expected = {2, 0, 3, 1, 4, 5};
  for (size_t k = 0; k < expected.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("acknowledging push ", k, " (batch ", expected[k], ")"));
    EXPECT_THAT(h.log().Pushes(), ElementsAreArray(expected.begin(), expected.begin() + k + 1));
    ASSERT_TRUE(h.Ack(expected[k], /*dropped=*/k == 3 ? 2 : 0));
  }
  EXPECT_THAT(h.log().Pushes(), ElementsAreArray(expected));
  EXPECT_EQ(h.log().max_pushes_in_flight(), 1);
  EXPECT_THAT(h.log().window_violations(), IsEmpty());
  absl::StatusOr<int> dropped = h.FinishStep();
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 2);  // the shards' stale-dropped gradients, summed
}

// A batch that becomes ready while others wait overtakes them when it holds
// a lower variable: acknowledgements interleaved with backward.
TEST(PsPipelinePriorityTest, ABatchReadyLaterOvertakesTheWaitingOnesOfHigherVariables) {
  Harness h("sync", kOneBatchWindow, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(0);
  h.pipeline().BeginStep(0);
  for (int v = kVariables - 1; v >= 2; --v) h.Report(0, v);  // ready: 2 (sent), 5, 1, 4
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2));
  ASSERT_TRUE(h.Ack(2));
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 1));  // 1 (variable 2) before 5 (variable 4)
  h.Report(0, 1);
  h.Report(0, 0);  // ready: 5, 4, 0, 3
  ASSERT_TRUE(h.Ack(1));
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 1, 0));  // 0, ready last, before 4 and 5
  for (int b : {0, 3, 4}) ASSERT_TRUE(h.Ack(b));
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 1, 0, 3, 4, 5));
  ASSERT_TRUE(h.Ack(5));
  EXPECT_TRUE(h.FinishStep().ok());
  EXPECT_THAT(h.log().window_violations(), IsEmpty());
}

// -------------------------------------------------------------------- window

struct WindowCase {
  const char* name;
  int64_t window_bytes;
  int most_in_flight;  // pushes in flight at once, at most (and reached)
};

class PsPipelineWindowTest : public ::testing::TestWithParam<WindowCase> {};

// Backward, then the oldest push in flight acknowledged until all are: no
// push ever puts more than the window in flight (unless it goes alone), and
// the window is used (two batches in flight when two fit).
TEST_P(PsPipelineWindowTest, NeverMoreBytesInFlightThanTheWindowUnlessOneBatchAlone) {
  const WindowCase& c = GetParam();
  Harness h("sync", c.window_bytes, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(0);
  h.pipeline().BeginStep(0);
  h.Backward(0);
  if (c.window_bytes == 0) {
    // No limit: every batch went the moment it was ready, before any
    // acknowledgement.
    EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5, 1, 4, 0, 3));
  }
  while (!h.log().Unanswered(ps_rpc::kPush).empty()) ASSERT_TRUE(h.Ack(h.log().Unanswered(ps_rpc::kPush).front()));
  ASSERT_THAT(h.log().Pushes(), UnorderedElementsAreArray({0, 1, 2, 3, 4, 5}));
  EXPECT_THAT(h.log().window_violations(), IsEmpty());
  EXPECT_EQ(h.log().max_pushes_in_flight(), c.most_in_flight);
  EXPECT_TRUE(h.FinishStep().ok());
}

INSTANTIATE_TEST_SUITE_P(Windows, PsPipelineWindowTest,
                         ::testing::Values(WindowCase{"unlimited", 0, kBatches},
                                           // Every batch is larger: each goes alone.
                                           WindowCase{"one_byte", 1, 1}, WindowCase{"one_batch", kOneBatchWindow, 1},
                                           WindowCase{"two_batches", kTwoBatchWindow, 2}),
                         [](const ::testing::TestParamInfo<WindowCase>& info) { return info.param.name; });

// ------------------------------------------------------ pushes per shard

// One push in flight per shard (ps_scheduling.pushes_per_shard 1), no
// window: backward makes every batch ready, but only the first of each
// shard goes; each acknowledgement lets that shard's next batch in priority
// order (the lowest variable index first) go, never a second to one shard.
TEST(PsPipelineShardLimitTest, OnePushPerShardAndTheNextInPriorityWhenItsShardIsFree) {
  Harness h("sync", /*window_bytes=*/0, 1, /*pushes_per_shard=*/1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(0);
  h.pipeline().BeginStep(0);
  h.Backward(0);
  // Batches 0-2 live on shard 0, 3-5 on shard 1; backward readies 2, 5, 1,
  // 4, 0, 3 in that order.
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5));
  ASSERT_TRUE(h.Ack(2));
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5, 0));
  ASSERT_TRUE(h.Ack(5));
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5, 0, 3));
  while (!h.log().Unanswered(ps_rpc::kPush).empty()) {
    const std::vector<int> in_flight = h.log().Unanswered(ps_rpc::kPush);
    int per_shard[kShards] = {0, 0};
    for (int b : in_flight) ++per_shard[kBatchShard[b]];
    EXPECT_LE(per_shard[0], 1);
    EXPECT_LE(per_shard[1], 1);
    ASSERT_TRUE(h.Ack(in_flight.front()));
  }
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5, 0, 3, 1, 4));
  EXPECT_EQ(h.log().max_pushes_in_flight(), 2);
  EXPECT_TRUE(h.FinishStep().ok());
}

// --------------------------------------------------------- pull after push

class PsPipelinePullTest : public ::testing::TestWithParam<std::string> {};

// Each batch is pulled only once its push is acknowledged (sync: one version
// past the one pushed; async: the latest); the answer lands in replica 0's
// variables; the next forward's wait for a variable returns once every batch
// holding it has landed, and replica 1 then holds replica 0's values.
TEST_P(PsPipelinePullTest, PullsFollowAcknowledgementsAndTheForwardWaitsForEveryBatchOfAVariable) {
  const bool sync = GetParam() == "sync";
  Harness h(GetParam(), /*window_bytes=*/0, 2);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  const auto initial = h.Values();
  h.pipeline().ValuesInPlace(7);
  h.pipeline().BeginStep(7);
  h.Backward(0);
  h.Backward(1);
  ASSERT_THAT(h.log().Pushes(), ElementsAre(2, 5, 1, 4, 0, 3));
  for (size_t i = 0; i < h.log().size(); ++i) {
    const Request r = h.log().At(i);
    EXPECT_EQ(r.step, 7) << "push of batch " << r.batch << ": the version it was computed on";
    EXPECT_EQ(r.local_step, 7) << "push of batch " << r.batch;
  }
  EXPECT_THAT(h.log().Pulls(), IsEmpty()) << "a pull before its push was acknowledged";

  // Acknowledged out of order: each acknowledgement issues exactly its
  // batch's pull.
  const int64_t min_version = sync ? 8 : 0;
  std::vector<int> acked;
  for (int b : {5, 0, 2, 4, 1, 3}) {
    SCOPED_TRACE(absl::StrCat("acknowledging batch ", b));
    ASSERT_TRUE(h.Ack(b));
    acked.push_back(b);
    EXPECT_THAT(h.log().Pulls(), ElementsAreArray(acked));
    const std::optional<Request> pull = h.log().Pending(ps_rpc::kPull, b);
    ASSERT_TRUE(pull.has_value());
    EXPECT_EQ(pull->min_version, min_version);
    EXPECT_EQ(pull->local_step, 8);  // the step it is pulled for
  }
  absl::StatusOr<int> finished = h.FinishStep();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_THAT(h.Changed(initial), IsEmpty()) << "a variable changed before its pull was answered";

  // The next forward: replica 1 waits for variable 0 (batches 0 and 3).
  auto wait0 = h.Start("WaitFor(1)(0)", [&] { h.pipeline().WaitFor(1)(0); });
  EXPECT_TRUE(wait0->StillBlocked());
  ASSERT_TRUE(h.AnswerPull(0, 8));
  EXPECT_TRUE(h.HoldsPulled(0, 0, 8));  // replica 0 holds batch 0's answer
  EXPECT_TRUE(wait0->StillBlocked()) << "variable 0 is still missing batch 3";
  EXPECT_TRUE(h.Value(1, 0) == initial[1][0]) << "replica 1 copied before the wait returned";
  ASSERT_TRUE(h.AnswerPull(3, 8));
  ASSERT_TRUE(wait0->Returns());
  EXPECT_TRUE(h.HoldsPulled(0, 3, 8));
  EXPECT_EQ(h.Value(1, 0), h.Value(0, 0));
  // Variable 1 (batch 3 only) has landed too: no wait, and replica 1 copies.
  h.Wait(1, 1);
  EXPECT_EQ(h.Value(1, 1), h.Value(0, 1));
  EXPECT_FALSE(h.Value(1, 1) == initial[1][1]);

  // Variable 4 (batches 2 and 5) on replica 0; the others land one by one.
  auto wait4 = h.Start("WaitFor(0)(4)", [&] { h.pipeline().WaitFor(0)(4); });
  ASSERT_TRUE(h.AnswerPull(5, 8));
  EXPECT_TRUE(wait4->StillBlocked()) << "variable 4 is still missing batch 2";
  for (int b : {1, 4, 2}) ASSERT_TRUE(h.AnswerPull(b, 8));
  ASSERT_TRUE(wait4->Returns());
  absl::StatusOr<int64_t> version = h.WaitForPulls();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 8);
  for (int b = 0; b < kBatches; ++b) EXPECT_TRUE(h.HoldsPulled(0, b, 8)) << "batch " << b;
  for (int v = 2; v < kVariables; ++v) {
    h.Wait(1, v);
    EXPECT_EQ(h.Value(1, v), h.Value(0, v)) << "variable " << v;
  }

  // The next step pushes what the pulls brought (version 8) and pulls one
  // past it.
  h.pipeline().BeginStep(8);
  h.Backward(0);
  h.Backward(1);
  const std::optional<Request> push = h.log().Pending(ps_rpc::kPush, 0);
  ASSERT_TRUE(push.has_value());
  EXPECT_EQ(push->step, 8);
  EXPECT_EQ(push->local_step, 8);
  ASSERT_TRUE(h.Ack(0));
  const std::optional<Request> pull = h.log().Pending(ps_rpc::kPull, 0);
  ASSERT_TRUE(pull.has_value());
  EXPECT_EQ(pull->min_version, sync ? 9 : 0);
  EXPECT_EQ(pull->local_step, 9);
}

INSTANTIATE_TEST_SUITE_P(Consistency, PsPipelinePullTest, ::testing::Values("sync", "async"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ------------------------------------------------ replicas with host mirrors

// GPU replicas keep their variables on the device and exchange host mirrors
// with the pipeline; here CPU replicas with host mirrors and copies that
// take time (TimedCopyEngine) stand for them. A variable's landed value
// reaches a replica's device copy when its forward waits for it, not before
// (so a later layer's pull may still be landing while an earlier layer
// computes), and each wait uploads it once, in forward order.
TEST(PsPipelineMirroredTest, TheForwardsWaitUploadsEachLandedValueToTheDeviceLayerByLayer) {
  Harness h("sync", /*window_bytes=*/0, 2);
  std::vector<TimedCopyEngine*> engines;
  ReplicaOptions options;
  options.copy_engine = [&engines](DeviceContext&) {
    auto engine = std::make_unique<TimedCopyEngine>(TimedCopyEngine::Options{/*gbps=*/16, absl::Milliseconds(1)});
    engines.push_back(engine.get());
    return engine;
  };
  ASSERT_NO_FATAL_FAILURE(h.Build(options));
  ASSERT_EQ(engines.size(), 2u);
  h.pipeline().ValuesInPlace(7);
  h.pipeline().BeginStep(7);
  h.Backward(0);
  h.Backward(1);
  for (int b = 0; b < kBatches; ++b) ASSERT_TRUE(h.Ack(b)) << "batch " << b;
  ASSERT_TRUE(h.FinishStep().ok());
  const std::vector<float> device_before = h.DeviceValue(1, 0);
  const std::vector<float> device_before_1 = h.DeviceValue(1, 1);

  // Variable 0 needs batches 0 and 3; its device copy changes only once the
  // wait returns.
  auto wait0 = h.Start("WaitFor(1)(0)", [&] { h.pipeline().WaitFor(1)(0); });
  ASSERT_TRUE(h.AnswerPull(0, 8));
  EXPECT_TRUE(wait0->StillBlocked());
  EXPECT_EQ(h.DeviceValue(1, 0), device_before) << "uploaded before every batch of it landed";
  ASSERT_TRUE(h.AnswerPull(3, 8));
  ASSERT_TRUE(wait0->Returns());
  EXPECT_EQ(h.DeviceValue(1, 0), h.Value(0, 0)) << "the wait returned before the upload was complete";
  EXPECT_NE(h.DeviceValue(1, 0), device_before);
  // Variable 1 (batch 3) has landed in the mirrors, but no layer read it yet.
  EXPECT_EQ(h.Value(1, 1), device_before_1) << "replica 1's mirror copies at its wait";
  EXPECT_EQ(h.DeviceValue(1, 1), device_before_1) << "uploaded before its layer waited for it";

  for (int b : {1, 2, 4, 5}) ASSERT_TRUE(h.AnswerPull(b, 8));
  for (int v = 1; v < kVariables; ++v) h.Wait(1, v);
  for (int v = 0; v < kVariables; ++v) {
    h.Wait(0, v);
    EXPECT_EQ(h.DeviceValue(0, v), h.Value(0, v)) << "replica 0, variable " << v;
    EXPECT_EQ(h.DeviceValue(1, v), h.Value(0, v)) << "replica 1, variable " << v;
  }
  // One upload per wait, in forward order, each the variable's bytes.
  for (int r = 0; r < 2; ++r) {
    std::vector<int64_t> uploaded;
    for (const TimedCopyEngine::Copy& c : engines[r]->copies()) {
      if (c.direction == TimedCopyEngine::Direction::kUpload) uploaded.push_back(c.bytes);
    }
    std::vector<int64_t> expected;
    for (int v = 0; v < kVariables; ++v) expected.push_back(h.variables(r)[v].value.num_bytes());
    EXPECT_EQ(uploaded, expected) << "replica " << r;
  }
}

// ------------------------------------------------------- multi-replica mean

// With two replicas a batch goes once both have reported all its variables,
// carrying the mean of their gradients.
TEST(PsPipelineReplicaTest, ABatchGoesOnceBothReplicasReportedItAndCarriesTheirMean) {
  Harness h("sync", /*window_bytes=*/0, 2);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(0);
  h.pipeline().BeginStep(0);
  // Replica 1 is ahead on the last layers, replica 0 on the first ones.
  for (int v : {7, 6, 5, 4}) h.Report(1, v);
  for (int v = kVariables - 1; v >= 0; --v) {
    h.Report(0, v);
    if (v == 4) {
      EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5)) << "variables 4..7 are final on both";
    }
  }
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5)) << "a batch went before replica 1 reported it";
  // Replica 1 completes batch by batch.
  std::vector<bool> reported(kVariables, false);
  for (int v : {7, 6, 5, 4}) reported[v] = true;
  for (int v : {3, 2, 1, 0}) {
    h.Report(1, v);
    reported[v] = true;
    std::vector<int> complete;
    for (int b : {2, 5, 1, 4, 0, 3}) {
      bool all = true;
      for (int var : kBatchVariables[b]) all = all && reported[var];
      if (all) complete.push_back(b);
    }
    EXPECT_THAT(h.log().Pushes(), ElementsAreArray(complete)) << "after replica 1 reported variable " << v;
  }
  ASSERT_EQ(h.log().Pushes().size(), static_cast<size_t>(kBatches));

  const std::vector<VariablePart>& parts = h.client().parts();
  for (size_t i = 0; i < h.log().size(); ++i) {
    const Request push = h.log().At(i);
    ASSERT_EQ(push.method, ps_rpc::kPush);
    ASSERT_EQ(push.gradients.size(), kBatchParts[push.batch].size());
    for (size_t k = 0; k < push.gradients.size(); ++k) {
      const VariablePart& part = parts[kBatchParts[push.batch][k]];
      ASSERT_EQ(push.gradients[k].size(), static_cast<size_t>(part.count));
      int64_t wrong = 0;
      for (int64_t j = 0; j < part.count; ++j) {
        const int64_t e = part.offset + j;
        const float mean = (Gradient(0, part.variable, e) + Gradient(1, part.variable, e)) * 0.5f;
        if (push.gradients[k][j] != mean) ++wrong;
      }
      EXPECT_EQ(wrong, 0) << part.name << ": elements not the mean of the replicas' gradients";
    }
  }
  for (int b = 0; b < kBatches; ++b) ASSERT_TRUE(h.Ack(b));
  EXPECT_TRUE(h.FinishStep().ok());
}

// ------------------------------------------------------------------ failure

// A push answered with an error fails the step (naming the shard) and
// releases a forward waiting for a variable; after Abandon and
// ValuesInPlace the abandoned step's late answers change nothing (no
// variable, no pull issued, nothing counted in flight), and the retried step
// is scheduled as if it had never been.
TEST(PsPipelineFailureTest, AFailedPushFailsTheStepAndLateAnswersOfTheAbandonedStepChangeNothing) {
  Harness h("sync", kTwoBatchWindow, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(3);
  h.pipeline().BeginStep(3);
  h.Backward(0);
  ASSERT_THAT(h.log().Pushes(), ElementsAre(2, 5));
  absl::StatusOr<int> finished;
  auto finish = h.Start("FinishStep", [&] { finished = h.pipeline().FinishStep(); });
  ASSERT_TRUE(h.Ack(2));  // its pull is issued; batch 0 joins 5 in flight
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2, 5, 0));
  EXPECT_THAT(h.log().Pulls(), ElementsAre(2));
  // A forward waiting for variable 4 (its batch 2 is being pulled).
  auto forward = h.Start("WaitFor(0)(4)", [&] { h.pipeline().WaitFor(0)(4); });
  EXPECT_TRUE(forward->StillBlocked());
  EXPECT_TRUE(finish->StillBlocked());

  ASSERT_TRUE(h.FailPush(0, absl::UnavailableError("shard restarted")));
  ASSERT_TRUE(finish->Returns());
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(finished.status().message(), HasSubstr("PS shard 0 (ps0:1)"));
  EXPECT_THAT(finished.status().message(), HasSubstr("shard restarted"));
  ASSERT_TRUE(forward->Returns()) << "the failure did not release the waiting forward";
  EXPECT_FALSE(h.WaitForPulls().ok());

  // Recovery: the strategy abandons the step and installs the shards' state.
  h.pipeline().Abandon();
  h.pipeline().ValuesInPlace(3);
  const auto recovered = h.Values();
  const size_t before_late = h.log().size();
  ASSERT_TRUE(h.Ack(5));            // the abandoned step's push, acknowledged late
  ASSERT_TRUE(h.AnswerPull(2, 4));  // and its pull, answered late
  EXPECT_THAT(h.Changed(recovered), IsEmpty()) << "a late answer of the abandoned step changed the variables";
  EXPECT_EQ(h.log().size(), before_late) << "a late answer of the abandoned step issued a request";

  // The retried step: the window starts empty, pulls ask one past the
  // recovered version.
  h.pipeline().BeginStep(3);
  h.Backward(0);
  EXPECT_THAT(h.log().Unanswered(ps_rpc::kPush), ElementsAre(2, 5));
  const std::vector<int> acks = {2, 5, 0, 3, 1, 4};
  for (int b : acks) {
    const std::optional<Request> push = h.log().Pending(ps_rpc::kPush, b);
    ASSERT_TRUE(push.has_value()) << "batch " << b;
    EXPECT_EQ(push->step, 3);
    ASSERT_TRUE(h.Ack(b));
    const std::optional<Request> pull = h.log().Pending(ps_rpc::kPull, b);
    ASSERT_TRUE(pull.has_value()) << "batch " << b;
    EXPECT_EQ(pull->min_version, 4);
  }
  EXPECT_EQ(h.log().max_pushes_in_flight(), 2);
  EXPECT_THAT(h.log().window_violations(), IsEmpty());
  finished = h.FinishStep();
  ASSERT_TRUE(finished.ok()) << finished.status();
  for (int b : acks) ASSERT_TRUE(h.AnswerPull(b, 4));
  absl::StatusOr<int64_t> version = h.WaitForPulls();
  ASSERT_TRUE(version.ok()) << version.status();
  EXPECT_EQ(*version, 4);
  for (int b = 0; b < kBatches; ++b) EXPECT_TRUE(h.HoldsPulled(0, b, 4)) << "batch " << b;
}

// A pull answered with an error fails the step too: the forward waiting for
// its variables is released, WaitForPulls and FinishStep return it.
TEST(PsPipelineFailureTest, AFailedPullReleasesTheForwardAndFailsTheStep) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(0);
  h.pipeline().BeginStep(0);
  h.Backward(0);
  for (int b = 0; b < kBatches; ++b) ASSERT_TRUE(h.Ack(b));
  ASSERT_TRUE(h.FinishStep().ok());
  h.pipeline().BeginStep(1);
  auto forward = h.Start("WaitFor(0)(2)", [&] { h.pipeline().WaitFor(0)(2); });  // batches 1 and 4
  ASSERT_TRUE(h.AnswerPull(1, 1));
  EXPECT_TRUE(forward->StillBlocked());
  ASSERT_TRUE(h.FailPull(4, absl::DeadlineExceededError("hidden2 is at version 0")));
  ASSERT_TRUE(forward->Returns());
  const absl::StatusOr<int64_t> pulls = h.WaitForPulls();
  ASSERT_FALSE(pulls.ok());
  EXPECT_THAT(pulls.status().message(), HasSubstr("Pull from PS shard 1 (ps1:1)"));
  h.Backward(0);
  EXPECT_THAT(h.log().Unanswered(ps_rpc::kPush), IsEmpty()) << "a push of a failed step";
  const absl::StatusOr<int> finished = h.FinishStep();
  EXPECT_EQ(finished.status(), pulls.status());
}

// Abandon while an acknowledgement's completion has chosen the next push but
// not sent it yet (it is issuing the acknowledged batch's pull): that push
// belongs to the abandoned step and must not go out once Abandon returned
// (it would count in the next step's window and acknowledgements, and reach
// shards that were restored meanwhile).
TEST(PsPipelineFailureTest, APushChosenBeforeAbandonIsNotSentAfterIt) {
  Harness h("sync", kTwoBatchWindow, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(5);
  h.pipeline().BeginStep(5);
  h.Backward(0);
  ASSERT_THAT(h.log().Pushes(), ElementsAre(2, 5));  // the window holds two batches
  absl::StatusOr<int> finished;
  auto finish = h.Start("FinishStep", [&] { finished = h.pipeline().FinishStep(); });
  bool recovered = false;
  size_t after_abandon = 0;
  // Batch 2's acknowledgement chooses batch 0, then issues batch 2's pull:
  // meanwhile (on the training thread, here inline) batch 5's push fails and
  // the strategy recovers.
  h.log().SetOnRequest([&](const Request& r) {
    if (r.method != ps_rpc::kPull || r.batch != 2 || recovered) return;
    recovered = true;
    EXPECT_TRUE(h.FailPush(5, absl::AbortedError("generation 2 replaced generation 1")));
    EXPECT_TRUE(finish->Returns());
    h.pipeline().Abandon();
    after_abandon = h.log().size();
    h.pipeline().ValuesInPlace(5);
  });
  ASSERT_TRUE(h.Ack(2));
  ASSERT_TRUE(recovered);
  ASSERT_FALSE(finished.ok());
  EXPECT_EQ(finished.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(h.log().size(), after_abandon) << "a push of the abandoned step went out after Abandon returned";
  h.log().SetOnRequest(nullptr);

  // The retried step is scheduled from an empty window.
  h.pipeline().BeginStep(5);
  h.Backward(0);
  EXPECT_THAT(h.log().Unanswered(ps_rpc::kPush), ElementsAre(2, 5));
  for (int b : {2, 5, 0, 3, 1, 4}) ASSERT_TRUE(h.Ack(b)) << "batch " << b;
  finished = h.FinishStep();
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_THAT(h.log().window_violations(), IsEmpty());
}

// Abandon does not return while a push is being handed to the client (the
// strategy installs the shards' new state next), and the pushes chosen with
// it are then not sent.
TEST(PsPipelineFailureTest, AbandonWaitsForAPushBeingSent) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  h.pipeline().ValuesInPlace(5);
  h.pipeline().BeginStep(5);
  std::unique_ptr<Background> abandon;
  // Variable 4 completes batches 2 and 5; while batch 2's push is being
  // handed over, the training thread abandons the step.
  h.log().SetOnRequest([&](const Request& r) {
    if (r.method != ps_rpc::kPush || abandon != nullptr) return;
    abandon = h.Start("Abandon", [&] { h.pipeline().Abandon(); });
    EXPECT_TRUE(abandon->StillBlocked()) << "Abandon returned while a push was being sent";
  });
  for (int v = kVariables - 1; v >= 4; --v) h.Report(0, v);
  ASSERT_NE(abandon, nullptr);
  ASSERT_TRUE(abandon->Returns());
  EXPECT_THAT(h.log().Pushes(), ElementsAre(2)) << "batch 5 was chosen with 2 but sent after Abandon";
  h.log().SetOnRequest(nullptr);
}

// ------------------------------------------------- PsClient::Pull (no pipeline)

// Pulls every batch of the harness's worker at `version` on its own thread,
// once every pull request has arrived.
std::unique_ptr<Background> StartPullOfEveryBatch(Harness& h, int64_t version, absl::StatusOr<int64_t>* pulled) {
  auto call = h.Start("Pull", [&h, version, pulled] {
    *pulled = h.client().Pull(version, absl::Hours(1), /*wait_for_ready=*/false, /*local_step=*/0);
  });
  test::WaitUntil([&h] { return h.log().Pulls().size() >= static_cast<size_t>(kBatches); },
                  absl::ToChronoMilliseconds(kGenerous));
  EXPECT_THAT(h.log().Pulls(), UnorderedElementsAreArray({0, 1, 2, 3, 4, 5}));
  return call;
}

// A pull of the whole model (the strategy's without the pipeline) reads each
// batch's answer into the variables as it arrives, while the others are
// still on their way, not all of them once the last has come.
TEST(PsClientPullTest, EachAnswerIsReadAsItArrivesWhileTheOthersAreOnTheirWay) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  absl::StatusOr<int64_t> pulled;
  auto call = StartPullOfEveryBatch(h, 8, &pulled);
  ASSERT_TRUE(h.AnswerPull(3, 8));
  EXPECT_TRUE(h.HoldsPulled(0, 3, 8)) << "batch 3 was not read when it arrived";
  EXPECT_EQ(h.client().bytes_pulled(), h.batch_bytes(3));
  EXPECT_TRUE(call->StillBlocked());
  for (int b : {5, 0, 2, 1}) ASSERT_TRUE(h.AnswerPull(b, 8)) << "batch " << b;
  ASSERT_TRUE(h.AnswerPull(4, 9));
  ASSERT_TRUE(call->Returns());
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  EXPECT_EQ(*pulled, 8);  // the smallest version answered
  for (int b = 0; b < kBatches; ++b) EXPECT_TRUE(h.HoldsPulled(0, b, b == 4 ? 9 : 8)) << "batch " << b;
}

// A shard lost ends the pull at once; answers that come after it are not
// read: the variables stay as they were when it returned.
TEST(PsClientPullTest, AShardLostEndsThePullAndLaterAnswersChangeNothing) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  absl::StatusOr<int64_t> pulled;
  auto call = StartPullOfEveryBatch(h, 8, &pulled);
  const Harness::Snapshot before = h.Values();
  ASSERT_TRUE(h.FailPull(0, absl::UnavailableError("shard 0 is gone")));
  ASSERT_TRUE(call->Returns());
  ASSERT_FALSE(pulled.ok()) << "returned " << *pulled;
  EXPECT_EQ(pulled.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(pulled.status().message(), HasSubstr("PS shard 0"));
  for (int b = 1; b < kBatches; ++b) ASSERT_TRUE(h.AnswerPull(b, 8)) << "batch " << b;
  EXPECT_THAT(h.Changed(before), IsEmpty());
  EXPECT_EQ(h.client().bytes_pulled(), 0);
}

// Pulls every batch at version 8, answering all but `bad_batch` as a shard
// would and that one with `bad`; returns what the pull returned.
absl::Status PullWithOneBadAnswer(Harness& h, int bad_batch, OutgoingFrame bad) {
  absl::StatusOr<int64_t> pulled;
  auto call = StartPullOfEveryBatch(h, 8, &pulled);
  for (int b = 0; b < kBatches; ++b) {
    if (b != bad_batch) {
      EXPECT_TRUE(h.AnswerPull(b, 8)) << "batch " << b;
    }
  }
  EXPECT_TRUE(h.log().Answer(ps_rpc::kPull, bad_batch, absl::OkStatus(), std::move(bad)));
  EXPECT_TRUE(call->Returns());
  return pulled.status();
}

// An answer that does not match its request fails the pull, naming the
// shard and what was wrong; the well-formed answers are still read.
TEST(PsClientPullTest, AMalformedAnswerFailsThePullNamingTheShard) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  PullResponse wrong;
  wrong.add_tensors()->set_name("not_a_part");
  wrong.add_versions(8);
  const absl::Status pulled = PullWithOneBadAnswer(h, 4, OutgoingFrame::FromHeader(wrong));
  ASSERT_FALSE(pulled.ok());
  EXPECT_THAT(pulled.message(), HasSubstr("PS shard 1"));
  EXPECT_THAT(pulled.message(), HasSubstr("returned 1 tensors"));
  for (int b : {0, 1, 2, 3, 5}) EXPECT_TRUE(h.HoldsPulled(0, b, 8)) << "batch " << b;
}

// A shard's answer must carry a version per tensor: one with fewer fails the
// pull, saying so, rather than reading past the versions it has.
TEST(PsClientPullTest, AnAnswerWithoutAVersionPerTensorFailsThePull) {
  Harness h("sync", /*window_bytes=*/0, 1);
  ASSERT_NO_FATAL_FAILURE(h.Build());
  OutgoingFrame answer = h.PullAnswer(2, 8);  // two tensors
  PullResponse header;
  ASSERT_TRUE(header.ParseFromString(answer.header));
  header.mutable_versions()->RemoveLast();
  header.SerializeToString(&answer.header);
  const absl::Status pulled = PullWithOneBadAnswer(h, 2, std::move(answer));
  ASSERT_FALSE(pulled.ok());
  EXPECT_THAT(pulled.message(), HasSubstr("returned 1 versions for 2 tensors"));
}

}  // namespace
}  // namespace pstrain
