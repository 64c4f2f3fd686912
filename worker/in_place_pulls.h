// InPlacePulls: pull answers that a transport receives straight into the
// worker's variables (CallOptions::receive_into), and how a PsClient stops
// them before it hands the variables to anything else.
//
// Each pull call gets a destination that places parts of its answer only
// while the call is open and its generation current. Stop() starts a new
// generation, so no part of an older call lands in the variables any more,
// and then waits until every call that placed parts has completed (a
// transport completes a call only once the parts it placed are in). So
// after Stop() returns, nothing of an earlier pull can overwrite the
// variables: a recovery's pulls (PsClient::Join), or a variable freed after
// the client, never meet a late answer written under them.
//
// Thread-safe: destinations run on transport threads, completions on
// callback threads.
#pragma once

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/transport.h"

namespace pstrain {

class InPlacePulls {
 public:
  // One pull call's part of it. Complete() must be called once the call's
  // answer (or failure) has arrived; a ticket's destination places nothing
  // after that.
  class Ticket {
   public:
    void Complete();

   private:
    friend class InPlacePulls;
    struct State;
    Ticket(std::shared_ptr<State> state, int64_t generation) : state_(std::move(state)), generation_(generation) {}
    const std::shared_ptr<State> state_;
    const int64_t generation_;
    bool placed_ = false;     // guarded by state_->mu
    bool completed_ = false;  // guarded by state_->mu
  };
  struct Call {
    PayloadDestination receive_into;  // null: nothing in place
    std::shared_ptr<Ticket> ticket;   // null with it
  };

  InPlacePulls();
  // Stop(): a PsClient's goes before its channels and its variables.
  ~InPlacePulls();
  // The destination of a new call: `places` while the call is open and no
  // Stop() came since. `places` null: a Call with nothing.
  Call Open(PayloadDestination places) const;
  // Ends every open call's placing and waits until the calls that placed
  // parts have completed.
  void Stop();

 private:
  std::shared_ptr<Ticket::State> state_;
};

}  // namespace pstrain
