#include "common/transport/grpc/shm_lane_calls.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/environment.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// Frames whose wire bytes are fewer than this travel inside their record;
// larger ones in a block of the sender's ring.
constexpr size_t kInlineWireBytes = kShmMinPayloadBytes;
// The most of a method name or an error message a record carries.
constexpr size_t kMaxText = 16 * 1024;
static_assert(kInlineWireBytes + kMaxText <= ShmCallQueue::kMaxRecordPayload);
// The most wire bytes of one answer in parts (gRPC's own limit on a message).
constexpr size_t kMaxAnswerInParts = size_t{1} << 31;
// How long an answer waits for room in the calls queue before it is given up.
constexpr absl::Duration kAnswerRoomWait = absl::Seconds(10);
constexpr absl::Duration kRoomPoll = absl::Microseconds(200);
// 20 us: 1.25x the colocated push+pull of no polling on a 2-core VM, where
// 100 us took a core from the copies (docs/BENCHMARKS.md).
constexpr int64_t kDefaultSpinMicros = 20;

// How long a lane's thread polls its queue before it sleeps:
// PSTRAIN_GRPC_LANE_SPIN_US (microseconds, default kDefaultSpinMicros).
absl::Duration SpinFromEnvironment() {
  static const absl::Duration spin =
      absl::Microseconds(IntFromEnvironment("PSTRAIN_GRPC_LANE_SPIN_US", kDefaultSpinMicros, "microseconds", 0));
  return spin;
}

void NameThisThread(const char* name) { pthread_setname_np(pthread_self(), name); }

// Joins `thread`, or lets it finish alone when this is it (a callback that
// dropped the last reference to its own lane).
void JoinOrDetach(std::thread& thread) {
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else {
    thread.join();
  }
}

// Tells a lane's thread to stop (`state.stop`, under `state.mu`), wakes it
// through `wake` and waits for it to end (unless this is it).
template <typename State>
void StopThread(State& state, ShmCallQueue& wake) {
  {
    absl::MutexLock lock(&state.mu);
    state.stop = true;
  }
  wake.Ring();
  JoinOrDetach(state.thread);
}

// A frame as a record carries it: its wire bytes inline, or a block of this
// side's ring that holds them.
struct EncodedFrame {
  std::string wire;
  std::optional<ShmDescriptor> block;
};

// Appends `frame`'s payload to `wire`.
void AppendPayload(const OutgoingFrame& frame, std::string& wire) {
  wire.reserve(wire.size() + frame.payload_bytes());
  for (const ConstChunk& chunk : frame.chunks) wire.append(static_cast<const char*>(chunk.data), chunk.size);
}

// `frame`'s wire bytes: EncodeWireHeader(header), then its payload.
std::string WireBytes(const OutgoingFrame& frame) {
  std::string wire = EncodeWireHeader(frame.header);
  AppendPayload(frame, wire);
  return wire;
}

// `frame` as a record carries it; nullopt when it needs a block and the ring
// has no room.
std::optional<EncodedFrame> Encode(ShmLane& lane, const OutgoingFrame& frame) {
  EncodedFrame out;
  out.wire = EncodeWireHeader(frame.header);
  if (out.wire.size() + frame.payload_bytes() < kInlineWireBytes) {
    AppendPayload(frame, out.wire);
    return out;
  }
  out.wire.clear();
  out.block = lane.WriteWire(frame);
  if (!out.block.has_value()) return std::nullopt;
  return out;
}

// The frame a record carries (its block or its lend, if any, is the
// reader's until the frame is gone).
absl::StatusOr<IncomingFrame> Decode(ShmLane& lane, ShmCallRecord& record) {
  if (record.block.has_value()) return lane.ReadWire(*record.block);
  if (!record.values.empty()) {
    return lane.ReadLent(std::move(record.wire),
                         ShmLend{std::move(record.values), record.lend_slot, record.lend_ticket});
  }
  auto wire = std::make_shared<std::string>(std::move(record.wire));
  return IncomingFrame::FromWire({{wire->data(), wire->size()}}, wire);
}

// A response record's status; a code absl does not have is an error of its own.
absl::Status StatusOf(const ShmCallRecord& record) {
  if (record.status_code < 0 || record.status_code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::InternalError(
        absl::StrCat("grpc: an answer through shared memory with status code ", record.status_code, ": ", record.text));
  }
  return absl::Status(static_cast<absl::StatusCode>(record.status_code), record.text);
}

}  // namespace

// ---------------------------------------------------------------- client

struct ShmLaneCaller::State {
  explicit State(std::shared_ptr<ShmLane> l) : lane(std::move(l)) {}

  struct Pending {
    ResponseCallback done;
    absl::Time deadline;
    std::optional<ShmDescriptor> block;  // the request's, taken back if it was never read
  };

  // The lane thread: completes calls as their answers come, fails them when
  // their deadline passes or the server goes.
  void Run() {
    NameThisThread("pstrain-lane-c");
    absl::Time next_check = absl::Now();
    for (;;) {
      absl::Time now = absl::Now();
      {
        absl::MutexLock lock(&mu);
        if (stop) return;
      }
      lane->responses().Wait(std::min(NextDeadline() - now, kLivenessCheck), SpinFromEnvironment());
      Drain();
      now = absl::Now();
      ExpireDeadlines(now);
      if (now >= next_check) {
        CheckPeer();
        next_check = now + kLivenessCheck;
      }
    }
  }

  absl::Time NextDeadline() {
    absl::MutexLock lock(&mu);
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, call] : pending) next = std::min(next, call.deadline);
    return next;
  }

  // Completes the calls whose answers wait in the responses queue.
  void Drain() {
    for (;;) {
      absl::StatusOr<std::optional<ShmCallRecord>> popped = lane->responses().Pop();
      absl::Status broke = popped.status();
      if (broke.ok() && popped->has_value()) broke = CheckAnswer(**popped);
      if (!broke.ok()) {
        parts.clear();
        FailAll(absl::UnavailableError(
            absl::StrCat("grpc: the shared-memory lane to the server broke (", broke.message(), ")")));
        return;
      }
      if (!popped->has_value()) return;
      ShmCallRecord& record = **popped;
      if (record.kind == ShmCallRecord::Kind::kResponsePart) {
        parts[record.call_id] += record.wire;
      } else {
        Complete(record);
      }
    }
  }

  // What is wrong with `record` as an answer or a part of one, if anything.
  absl::Status CheckAnswer(const ShmCallRecord& record) const {
    if (record.kind == ShmCallRecord::Kind::kRequest) return absl::DataLossError("a request among its answers");
    if (record.kind == ShmCallRecord::Kind::kResponsePart && record.block.has_value()) {
      return absl::DataLossError("a part of an answer in a block");
    }
    auto it = parts.find(record.call_id);
    const size_t joined = it == parts.end() ? 0 : it->second.size();
    if (joined > 0 && (record.block.has_value() || !record.values.empty())) {
      return absl::DataLossError("an answer in parts and in a block or lent");
    }
    if (joined + record.wire.size() > kMaxAnswerInParts) {
      return absl::DataLossError(absl::StrCat("an answer in parts of over ", kMaxAnswerInParts, " bytes"));
    }
    return absl::OkStatus();
  }

  // Completes the call `record` answers (its own wire bytes after its
  // earlier parts), unless it already ended.
  void Complete(ShmCallRecord& record) {
    if (auto it = parts.find(record.call_id); it != parts.end()) {
      it->second += record.wire;
      record.wire = std::move(it->second);
      parts.erase(it);
    }
    std::optional<Pending> call = Take(record.call_id);
    absl::Status status = StatusOf(record);
    if (!call.has_value() || !status.ok()) {
      if (record.block.has_value() || !record.values.empty()) {
        Decode(*lane, record).IgnoreError();  // frees the block, gives the lend back
      }
      if (call.has_value()) call->done(status, {});
      return;
    }
    absl::StatusOr<IncomingFrame> frame = Decode(*lane, record);
    if (frame.ok()) {
      call->done(absl::OkStatus(), *std::move(frame));
    } else {
      call->done(frame.status(), {});
    }
  }

  std::optional<Pending> Take(uint64_t id) {
    absl::MutexLock lock(&mu);
    auto it = pending.find(id);
    if (it == pending.end()) return std::nullopt;  // its deadline passed, or it was failed
    Pending call = std::move(it->second);
    pending.erase(it);
    return call;
  }

  void ExpireDeadlines(absl::Time now) {
    std::vector<Pending> expired;
    {
      absl::MutexLock lock(&mu);
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->second.deadline > now) {
          ++it;
          continue;
        }
        expired.push_back(std::move(it->second));
        pending.erase(it++);
      }
    }
    for (Pending& call : expired) {
      if (call.block.has_value()) lane->Withdraw(*call.block);
      call.done(absl::DeadlineExceededError("deadline passed before the server answered (through shared memory)"), {});
    }
  }

  void CheckPeer() {
    if (lane->closed()) {
      FailAll(absl::UnavailableError("grpc: the server closed the shared-memory lane (it stopped)"));
    } else if (ProcessHasExited(lane->server_pid())) {
      FailAll(
          absl::UnavailableError(absl::StrCat("grpc: the server's process (pid ", lane->server_pid(), ") has exited")));
    }
  }

  // No more calls through this lane; every call waiting fails with `why`.
  void FailAll(const absl::Status& why) {
    absl::flat_hash_map<uint64_t, Pending> failed;
    {
      absl::MutexLock lock(&mu);
      if (broken.ok()) broken = why;
      failed.swap(pending);
    }
    for (auto& [id, call] : failed) {
      if (call.block.has_value()) lane->Withdraw(*call.block);
      call.done(why, {});
    }
  }

  const std::shared_ptr<ShmLane> lane;
  // The slices so far of answers that come in parts, by call (the lane
  // thread's alone).
  absl::flat_hash_map<uint64_t, std::string> parts;
  absl::Mutex mu;
  absl::flat_hash_map<uint64_t, Pending> pending ABSL_GUARDED_BY(mu);
  uint64_t next_id ABSL_GUARDED_BY(mu) = 1;
  absl::Status broken ABSL_GUARDED_BY(mu);  // not OK once the lane takes no calls
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;
};

ShmLaneCaller::ShmLaneCaller(std::shared_ptr<ShmLane> lane) : state_(std::make_shared<State>(std::move(lane))) {
  state_->thread = std::thread([state = state_] { state->Run(); });
}

ShmLaneCaller::~ShmLaneCaller() {
  StopThread(*state_, state_->lane->responses());
  // Nobody reads answers from here on: the server stops serving the lane.
  state_->lane->CloseClientSide();
  state_->lane->requests().Ring();
  state_->FailAll(absl::CancelledError("grpc: the channel was destroyed with the call in flight"));
}

bool ShmLaneCaller::usable() const {
  absl::MutexLock lock(&state_->mu);
  return state_->broken.ok() && !state_->stop && !state_->lane->closed();
}

bool ShmLaneCaller::Call(std::string_view method, OutgoingFrame& request, absl::Time deadline, ResponseCallback& done) {
  if (method.size() > kMaxText || !usable()) return false;
  ShmLane& lane = *state_->lane;
  std::optional<EncodedFrame> encoded = Encode(lane, request);
  if (!encoded.has_value()) return false;
  ShmCallRecord record;
  record.kind = ShmCallRecord::Kind::kRequest;
  record.text = std::string(method);
  record.wire = std::move(encoded->wire);
  record.block = encoded->block;
  {
    // The call is pending before its request can be answered.
    absl::MutexLock lock(&state_->mu);
    record.call_id = state_->next_id++;
    if (!state_->broken.ok() || state_->stop || !lane.requests().TryPush(record)) {
      if (record.block.has_value()) lane.Withdraw(*record.block);
      return false;
    }
    state_->pending.emplace(record.call_id, State::Pending{std::move(done), deadline, record.block});
  }
  lane.requests().Ring();
  request.chunks.clear();
  return true;
}

// ---------------------------------------------------------------- server

struct ShmLaneCallee::State {
  State(std::shared_ptr<ShmLane> l, Handler* h) : lane(std::move(l)), handler(h) {}

  // The lane thread: hands requests to the handler until Close, a bad
  // record, or the client's exit.
  void Run() {
    NameThisThread("pstrain-lane-s");
    absl::Time next_check = absl::Now() + kLivenessCheck;
    while (!stopping()) {
      lane->requests().Wait(kLivenessCheck, SpinFromEnvironment());
      if (!ServeWaiting()) {
        lane->Close();
        lane->responses().Ring();
        return;
      }
      if (lane->client_closed()) return;
      if (absl::Now() >= next_check) {
        if (ProcessHasExited(lane->client_pid())) return;
        next_check = absl::Now() + kLivenessCheck;
      }
    }
  }

  bool stopping() {
    absl::MutexLock lock(&mu);
    return stop;
  }

  // Serves the requests waiting; false when the queue is corrupt.
  bool ServeWaiting() {
    while (!stopping()) {
      absl::StatusOr<std::optional<ShmCallRecord>> popped = lane->requests().Pop();
      if (popped.ok() && popped->has_value() && (*popped)->kind != ShmCallRecord::Kind::kRequest) {
        popped = absl::DataLossError("an answer among the requests");
      }
      if (!popped.ok()) {
        LOG(WARNING) << "grpc: dropping the shared-memory lane of client pid " << lane->client_pid() << ": "
                     << popped.status();
        return false;
      }
      if (!popped->has_value()) return true;
      ShmCallRecord& record = **popped;
      Responder respond = ResponderFor(record.call_id);
      absl::StatusOr<IncomingFrame> frame = Decode(*lane, record);
      if (!frame.ok()) {
        respond(frame.status(), {});
        continue;
      }
      handler->Handle(record.text, *std::move(frame), std::move(respond));
    }
    return true;
  }

  // Answers call `id` once; a responder dropped unanswered answers INTERNAL.
  Responder ResponderFor(uint64_t id) {
    struct Once {
      Once(std::shared_ptr<State> s, uint64_t i) : state(std::move(s)), id(i) {}
      ~Once() {
        if (!answered.exchange(true)) state->Answer(id, absl::InternalError("the server dropped the request"), {});
      }
      std::shared_ptr<State> state;
      uint64_t id;
      std::atomic<bool> answered{false};
    };
    auto once = std::make_shared<Once>(self.lock(), id);
    return [once](absl::Status status, OutgoingFrame response) {
      if (!once->answered.exchange(true)) once->state->Answer(once->id, status, std::move(response));
    };
  }

  // Writes call `id`'s answer into the responses queue: a large one in a
  // block of the ring or, when the ring has no room for it (the client
  // holds earlier answers, or it is larger than the ring), in slices
  // through the queue; waits for room in the queue while the client takes
  // earlier records.
  void Answer(uint64_t id, absl::Status status, OutgoingFrame response) {
    if (lane->client_closed()) return;  // nobody would read it
    ShmCallRecord record;
    record.kind = ShmCallRecord::Kind::kResponse;
    record.call_id = id;
    std::string in_parts;  // the answer's wire bytes, when they go in slices
    std::optional<ShmLend> lend;
    if (status.ok()) lend = Lend(response, record);
    if (status.ok() && !lend.has_value()) {
      std::optional<EncodedFrame> encoded = Encode(*lane, response);
      if (encoded.has_value()) {
        record.wire = std::move(encoded->wire);
        record.block = encoded->block;
      } else {
        in_parts = WireBytes(response);
        WarnOnceOfParts(in_parts.size());
      }
    }
    record.status_code = static_cast<int32_t>(status.code());
    record.text = std::string(status.message().substr(0, kMaxText));
    absl::MutexLock lock(&write_mu);
    if (!SendAllButTheLastSlice(id, in_parts, record) || !Push(record)) {
      if (record.block.has_value()) lane->Withdraw(*record.block);
      if (lend.has_value()) lane->lender().TakeBack(*lend);
      return;
    }
    lane->responses().Ring();
  }

  // Lends `response`'s payload (shm_lends.h) into `record` when it can be
  // (its wire header and references fit a record inline). The header is
  // encoded only once lent: most answers are not.
  std::optional<ShmLend> Lend(const OutgoingFrame& response, ShmCallRecord& record) {
    // The wire header is the header after its varint32 length (5 bytes at most).
    const size_t wire_bytes = response.header.size() + 5;
    if (wire_bytes >= kInlineWireBytes) return std::nullopt;
    const size_t max_refs = (kInlineWireBytes - wire_bytes) / (2 * sizeof(uint64_t));
    std::optional<ShmLend> lend = lane->lender().Lend(response, kShmMinPayloadBytes, max_refs);
    if (!lend.has_value()) return std::nullopt;
    record.wire = EncodeWireHeader(response.header);
    record.values = lend->refs;
    record.lend_slot = lend->slot;
    record.lend_ticket = lend->ticket;
    return lend;
  }

  // Sends `wire` but its last slice as response parts of call `id`; the
  // last slice goes into `last`. False when the client stopped taking them.
  bool SendAllButTheLastSlice(uint64_t id, std::string_view wire, ShmCallRecord& last)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu) {
    ShmCallRecord part;
    part.kind = ShmCallRecord::Kind::kResponsePart;
    part.call_id = id;
    for (; wire.size() > kInlineWireBytes; wire.remove_prefix(kInlineWireBytes)) {
      part.wire.assign(wire.substr(0, kInlineWireBytes));
      if (!Push(part)) return false;
      lane->responses().Ring();
    }
    last.wire.append(wire);
    return true;
  }

  bool Push(const ShmCallRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu) {
    return WaitForRoom([&] { return lane->responses().TryPush(record) ? std::optional<bool>(true) : std::nullopt; })
        .has_value();
  }

  void WarnOnceOfParts(size_t bytes) {
    if (warned_of_parts.exchange(true)) return;
    LOG(WARNING) << "grpc: the shared-memory lane of client pid " << lane->client_pid()
                 << " has no room for an answer of " << bytes
                 << " bytes (its client holds earlier answers, or the answer is larger than the lane); such "
                 << "answers go in slices through the call queue, a copy more. PSTRAIN_GRPC_SHARED_MEMORY_MB sets the "
                 << "lane's size (MiB each way).";
  }

  // `attempt()` until it gives a value, the lane closes or its client goes,
  // or kAnswerRoomWait passes.
  template <typename Attempt>
  auto WaitForRoom(Attempt attempt) -> decltype(attempt()) {
    const absl::Time give_up = absl::Now() + kAnswerRoomWait;
    for (;;) {
      auto value = attempt();
      if (value.has_value() || lane->closed() || lane->client_closed() || ProcessHasExited(lane->client_pid()) ||
          absl::Now() > give_up) {
        return value;
      }
      absl::SleepFor(kRoomPoll);
    }
  }

  const std::shared_ptr<ShmLane> lane;
  Handler* const handler;
  std::weak_ptr<State> self;
  absl::Mutex write_mu;  // one writer of the responses queue at a time
  std::atomic<bool> warned_of_parts{false};
  absl::Mutex mu;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;
};

ShmLaneCallee::ShmLaneCallee(std::shared_ptr<ShmLane> lane, Handler* handler)
    : state_(std::make_shared<State>(std::move(lane), handler)) {
  state_->self = state_;
  state_->thread = std::thread([state = state_] { state->Run(); });
}

ShmLaneCallee::~ShmLaneCallee() { Close(); }

void ShmLaneCallee::Close() {
  StopThread(*state_, state_->lane->requests());
  state_->lane->Close();
  state_->lane->responses().Ring();
}

}  // namespace pstrain
