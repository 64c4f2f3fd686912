// The server side of the ucx transport: listeners, the connections they
// accept, and the responders of the requests that come on them (class
// Servers).
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
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/transport.h"
#include "common/transport/ucx/active_messages.h"
#include "common/transport/ucx/address.h"

namespace pstrain::ucx {

class Engine;
class Servers;

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
  Servers* servers = nullptr;  // the listener's callback argument points here
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

// The servers of one engine and the connections they accepted. Every
// function runs on the engine's progress thread only and starts with
// engine.progress().AssertHeld(); handlers run on callback threads.
class Servers {
 public:
  explicit Servers(Engine& engine) : engine_(engine) {}

  // Listens on `address` for server `server_id`; the port it listens on.
  absl::StatusOr<int> Listen(uint64_t server_id, std::shared_ptr<ServerState> state, const SocketAddress& address);
  // Shutdown's steps: no new connections; then every connection closed
  // (answers already queued go out first); then the server forgotten.
  void StopListening(uint64_t server_id);
  void CloseConns(uint64_t server_id);
  void Remove(uint64_t server_id);
  // A client's hello on `ep`: answered, the connection is up.
  void AcknowledgeHello(ucp_ep_h ep);
  // A request arrived: handed to its server's handler with a Responder.
  void Deliver(ReceivedMessage message);
  // Answers request `call_id` on `ep` with `status` (an error).
  void Reject(ucp_ep_h ep, uint64_t call_id, absl::Status status);
  // A Responder's answer to request `call_id` on connection `conn_id`.
  void SendResponse(uint64_t conn_id, uint64_t call_id, absl::Status status, OutgoingFrame frame);
  // The endpoint of connection `conn_id` failed (its owner forgot it).
  void EndpointFailed(uint64_t conn_id);
  // Teardown: destroys every listener and closes every server endpoint.
  void CloseAll();

 private:
  static void OnConnRequest(ucp_conn_request_h request, void* arg);
  void Accept(uint64_t server_id, ucp_conn_request_h request);
  Responder MakeResponder(std::shared_ptr<ServerState> state, uint64_t conn_id, uint64_t call_id);

  Engine& engine_;
  std::map<uint64_t, ServerRecord> servers_;  // std::map: a record's address is the listener's argument
  std::map<uint64_t, ServerConn> conns_;
};

}  // namespace pstrain::ucx
