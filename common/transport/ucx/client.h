// The client side of the ucx transport: the calls of a Channel, and the
// connection state machine of its endpoint. Engine's functions of this side
// are defined in client.cc; these are the objects they keep.
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
// Deadlines. Every call with a finite deadline is in the engine's deadline
// queue; the progress loop completes it DEADLINE_EXCEEDED when it passes (an
// answer that arrives later is dropped).
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "common/transport/ucx/address.h"

namespace pstrain::ucx {

// Reconnection backoff for wait_for_ready calls (doubling from the first).
inline constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
inline constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

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

}  // namespace pstrain::ucx
