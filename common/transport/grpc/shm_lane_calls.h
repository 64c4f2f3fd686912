// Calls through a shared-memory lane without a gRPC call: the lane's own
// request and response queues (shm_call_queue.h) with a futex doorbell.
//
// Once a client's lane is attached (grpc_shm.h), its channel sends every
// call that does not wait for the server to come up through the lane: the
// request's record (with the frame inline, or in a block of the client's
// ring) goes into the requests queue and rings the server's lane thread,
// which hands it to the server's Handler on that thread; the answer's record
// goes back the same way to the client's lane thread, which runs the call's
// callback. A call then costs its copies and two wake-ups, not a gRPC call
// (HTTP/2 framing, metadata, completion-queue hand-offs: about 300 us of CPU
// at both ends together on a 2-core VM, docs/BENCHMARKS.md).
//
// What gRPC gave these calls, kept: a call's deadline (the client's lane
// thread fails it with DEADLINE_EXCEEDED), a peer that goes away (a server
// that closes the lane or whose process exits fails every call waiting on it
// with UNAVAILABLE, within kLivenessCheck; a server whose client process has
// exited stops serving the lane), and a bad record (DATA_LOSS: the lane is
// dropped and the channel goes back to the socket). The token was checked
// when the lane was attached: a lane is reachable only by the processes that
// hold its segment. Handle runs on the lane's thread, one request at a time
// in arrival order, so it must not block for long (the Handler contract);
// control methods travel on channels of their own and never have a lane.
#pragma once

#include <memory>
#include <string_view>

#include "absl/time/time.h"
#include "common/transport/grpc/shm_lane.h"
#include "common/transport/transport.h"

namespace pstrain {

// How often each side checks that the other is still there.
inline constexpr absl::Duration kLivenessCheck = absl::Milliseconds(50);

// The client's side of one lane: sends calls, completes them from its thread.
class ShmLaneCaller {
 public:
  explicit ShmLaneCaller(std::shared_ptr<ShmLane> lane);
  // Fails the calls still waiting (CANCELLED) and stops the thread.
  ~ShmLaneCaller();
  ShmLaneCaller(const ShmLaneCaller&) = delete;
  ShmLaneCaller& operator=(const ShmLaneCaller&) = delete;

  // Sends a call through the lane; `done` runs exactly once, on the lane's
  // thread. False, leaving `request` and `done` as they were, when the lane
  // cannot take it now (closed, its server gone, broken, or no room): the
  // caller sends it another way.
  bool Call(std::string_view method, OutgoingFrame& request, absl::Time deadline, ResponseCallback& done);
  // Whether the lane still serves calls (not closed or broken, and its server
  // process was there at the last check).
  bool usable() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// The server's side of one lane: a thread that hands the lane's requests to
// `handler` and writes the answers back.
class ShmLaneCallee {
 public:
  // `handler` (not owned) must outlive Close().
  ShmLaneCallee(std::shared_ptr<ShmLane> lane, Handler* handler);
  // Close().
  ~ShmLaneCallee();
  ShmLaneCallee(const ShmLaneCallee&) = delete;
  ShmLaneCallee& operator=(const ShmLaneCallee&) = delete;

  // Takes no more requests and closes the lane (the client fails what still
  // waits with UNAVAILABLE); returns once Handle no longer runs on the
  // lane's thread. Answers given later are dropped. Idempotent.
  void Close();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace pstrain
