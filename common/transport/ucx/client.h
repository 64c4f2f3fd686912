// The client side of the ucx transport: the calls of every Channel of one
// engine, and the connection state machine of each channel's endpoint
// (class ClientCalls).
//
// Connecting. A channel connects on its first call. A client first exchanges
// a hello with the server on each new endpoint (kHello, answered kHelloAck),
// so it knows when the connection is up: calls issued meanwhile wait in
// pstrain (kConnecting), and a call is only sent on a connected endpoint
// (kReady). A failed attempt completes the waiting calls UNAVAILABLE, except
// wait_for_ready calls: they keep waiting, and the connection is retried
// with backoff (kFirstBackoff, doubling up to kMaxBackoff) until they are
// done, without any risk of delivering a request twice. While it backs off,
// a new call without wait_for_ready fails at once with the last error. A
// connection that fails once up completes the calls sent on it UNAVAILABLE
// and goes back to kIdle: the next call reconnects. Destroying the channel
// completes its calls CANCELLED and closes its endpoint.
//
// Deadlines. Every call with a finite deadline is in the deadline queue;
// the progress loop completes it DEADLINE_EXCEEDED when it passes (an answer
// that arrives later is dropped).
//
// Answers received in place (CallOptions::receive_into). A part of an
// answer whose payload range the caller names is received straight into the
// caller's memory. While such a part is on its way the call cannot complete
// (UCX would write into memory the caller may free): a deadline or failure
// meanwhile is held until the part is in or has failed, and a connection
// whose part is still on its way kInPlaceGrace after that closes, which
// fails the part.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "common/transport/ucx/active_messages.h"
#include "common/transport/ucx/address.h"

namespace pstrain::ucx {

class Engine;

// Reconnection backoff for wait_for_ready calls (doubling from the first).
inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
inline constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// How long a call whose deadline passed waits for a part on its way into
// the caller's memory before its connection is closed.
inline constexpr absl::Duration kInPlaceGrace = absl::Seconds(5);

// Calls `done` exactly once: through Run, or -- if the call is dropped
// without an answer (its task discarded at shutdown) -- with UNAVAILABLE.
class Completion {
 public:
  explicit Completion(ResponseCallback done) : done_(std::move(done)) {}
  Completion(Completion&& other) noexcept : done_(std::exchange(other.done_, nullptr)) {}
  Completion& operator=(Completion&&) = delete;
  ~Completion() {
    if (done_) done_(absl::UnavailableError("ucx: the transport shut down before the call completed"), {});
  }
  void Run(absl::Status status, IncomingFrame frame) {
    ResponseCallback done = std::exchange(done_, nullptr);
    done(std::move(status), std::move(frame));
  }

 private:
  ResponseCallback done_;
};

// One call a client made, from Call() until it completes.
struct PendingCall {
  explicit PendingCall(ResponseCallback done) : completion(std::move(done)) {}
  uint64_t conn_id = 0;
  std::string method;
  OutgoingFrame request;  // until it is handed to UCX
  absl::Time started;
  absl::Time deadline;
  bool wait_for_ready = false;
  PayloadDestination receive_into;  // CallOptions::receive_into
  // Parts of the answer being received into the caller's memory: the call
  // completes only once none is (UCX would write there after `done`); a
  // completion that comes meanwhile is held here.
  int receiving_in_place = 0;
  std::optional<absl::Status> held;
  absl::Time grace_ends;  // with `held`: when the connection closes
  Completion completion;
};

// The client side of one Channel: its endpoint, and the calls on it.
struct ClientConn {
  enum class State { kIdle, kConnecting, kReady };
  std::string address;
  SocketAddress peer;
  ucp_ep_h ep = nullptr;
  State state = State::kIdle;
  std::set<uint64_t> waiting;  // calls to send once connected, in call order
  std::set<uint64_t> sent;     // calls sent on `ep`, awaiting their answers
  // After a failed attempt with wait_for_ready calls waiting: when to retry.
  absl::Time retry_at = absl::InfiniteFuture();
  absl::Duration backoff = kFirstBackoff;
  std::string last_error;  // why the last attempt failed
};

// The calls and client connections of one engine. Every function runs on
// the engine's progress thread only and starts with
// engine.progress().AssertHeld(); completions run on callback threads.
class ClientCalls {
 public:
  explicit ClientCalls(Engine& engine) : engine_(engine) {}

  // Starts `call` on its channel's connection (call->conn_id; made on first
  // use for `address`, `peer`): sent now, queued until connected, or failed.
  void Start(uint64_t call_id, std::unique_ptr<PendingCall> call, const std::string& address,
             const SocketAddress& peer);
  // The channel was destroyed: its calls complete CANCELLED, its endpoint closes.
  void CloseConn(uint64_t conn_id);
  // Whether an answer to `call_id` would be taken (the call is pending).
  bool Expects(uint64_t call_id) const;
  // Where the caller of `call_id` wants its answer's payload bytes
  // [offset, offset + bytes): memory a part is then received into, counted
  // until ReceivedInPlace; null when not wanted (receive into a buffer).
  void* ReceiveInPlace(uint64_t call_id, uint64_t offset, size_t bytes);
  // A part ReceiveInPlace placed is in, or failed.
  void ReceivedInPlace(uint64_t call_id);
  // The server acknowledged the hello on `ep`: the waiting calls are sent.
  void Connected(ucp_ep_h ep);
  // Sending the request of `call_id` (method `method`) failed.
  void RequestSendFailed(uint64_t call_id, const std::string& method, ucs_status_t status);
  // An answer arrived.
  void Deliver(ReceivedMessage message);
  // Completes the call (if still pending) on a callback thread; a failure
  // while parts are arriving in place is held until they are in.
  void Complete(uint64_t call_id, absl::Status status, IncomingFrame frame = {});
  // The progress loop's turn: calls whose deadline passed complete, and
  // connections whose backoff ended are tried again.
  void ExpireCalls(absl::Time now);
  void RetryConnections(absl::Time now);
  // The earlier of `wake` and the next deadline or retry.
  absl::Time NextWake(absl::Time wake) const;
  // The endpoint of connection `conn_id` failed (its owner forgot it).
  void EndpointFailed(uint64_t conn_id, ucs_status_t status);
  // Teardown: closes every client endpoint and fails every call.
  void CloseAll();

 private:
  void SendOrQueue(uint64_t conn_id, ClientConn& conn, uint64_t call_id, bool wait_for_ready);
  void Connect(uint64_t conn_id, ClientConn& conn);
  void ConnectFailed(ClientConn& conn, const std::string& why);
  void SendRequest(ClientConn& conn, uint64_t call_id);
  // Closes `conn`'s endpoint at once (its calls complete UNAVAILABLE `why`).
  void DropEndpoint(ClientConn& conn, const std::string& why);

  Engine& engine_;
  std::map<uint64_t, std::unique_ptr<PendingCall>> calls_;
  std::multimap<absl::Time, uint64_t> deadlines_;  // may name completed calls
  std::map<uint64_t, ClientConn> conns_;
};

}  // namespace pstrain::ucx
