// The server side of the ucx transport: listeners, the connections they
// accept, and the responders of the requests that come on them. Engine's
// functions of this side are defined in server.cc; these are the objects
// they keep.
//
// A listener (ucp_listener_create) accepts each connection request as an
// endpoint of its own (a ServerConn) and answers the client's hello on it.
// Each request is handed to the Handler on a callback thread with a
// Responder that answers exactly once: the first call wins, and a request
// whose every Responder copy is dropped unanswered is answered INTERNAL, so
// the client is not left waiting for its deadline. Shutdown (UcxServer,
// ucx_transport.cc) stops the listener, answers new requests UNAVAILABLE,
// waits for the accepted ones (ServerState counts them), then closes the
// connections; answers already queued go out first.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/transport.h"

namespace pstrain::ucx {

class Engine;

// One Server, shared by the UcxServer object, the engine and responders
// (which may outlive both). Counts what Shutdown waits for.
struct ServerState {
  ServerState(Handler* h, std::string a) : handler(h), address(std::move(a)) {}

  Handler* const handler;
  const std::string address;  // as given to Serve()
  absl::Mutex mu;
  absl::CondVar changed;
  // False once Shutdown began: new requests are answered UNAVAILABLE.
  bool accepting ABSL_GUARDED_BY(mu) = true;
  // True once Shutdown's grace ended: the handler is not called again.
  bool closed ABSL_GUARDED_BY(mu) = false;
  int unanswered ABSL_GUARDED_BY(mu) = 0;  // requests accepted whose responder has not run
  int in_handle ABSL_GUARDED_BY(mu) = 0;   // threads inside handler->Handle
};

// A listening server, as the engine keeps it.
struct ServerRecord {
  Engine* engine = nullptr;  // the listener's callback argument points here
  uint64_t id = 0;
  std::shared_ptr<ServerState> state;
  ucp_listener_h listener = nullptr;
  std::set<uint64_t> conns;
};

// A connection a server accepted.
struct ServerConn {
  uint64_t server_id = 0;
  ucp_ep_h ep = nullptr;
};

}  // namespace pstrain::ucx
