// The server side: listeners, accepted connections, requests handed to the
// Handler and their responders (Servers, server.h).
#include "common/transport/ucx/server.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/ucx/address.h"
#include "common/transport/ucx/engine.h"
#include "common/transport/ucx/workers.h"
#include "glog/logging.h"

namespace pstrain::ucx {
namespace {

using ucx_wire::AmHeader;
using ucx_wire::Kind;

// What a Responder shares between its copies. Answers exactly once: the
// first call wins; if every copy is dropped unanswered, the destructor
// answers INTERNAL so the client is not left waiting for its deadline.
struct ResponderState {
  std::weak_ptr<Engine> engine;
  std::shared_ptr<ServerState> server;
  uint64_t conn_id = 0;
  uint64_t call_id = 0;
  std::atomic<bool> answered{false};

  void Answer(absl::Status status, OutgoingFrame response) {
    if (answered.exchange(true)) {
      LOG(DFATAL) << "ucx: a request on " << server->address << " was answered twice";
      return;
    }
    // Queue the answer before counting it answered, so that Shutdown, which
    // closes the connections once nothing is unanswered, queues its close
    // after this send.
    if (std::shared_ptr<Engine> e = engine.lock()) {
      e->Post([e = e.get(), conn_id = conn_id, call_id = call_id, status = std::move(status),
               response = std::move(response)]() mutable {
        e->progress().AssertHeld();
        e->servers().SendResponse(conn_id, call_id, std::move(status), std::move(response));
      });
    }
    absl::MutexLock lock(&server->mu);
    --server->unanswered;
    server->changed.SignalAll();
  }

  ~ResponderState() {
    if (!answered.load()) Answer(absl::InternalError("ucx: the server dropped the request without answering"), {});
  }
};

// Hands a request to the server's handler (on a callback thread), unless
// Shutdown gave up on the server meanwhile; counts the thread in Handle.
void CallHandler(ServerState& state, const std::string& method, IncomingFrame frame, Responder respond) {
  {
    absl::MutexLock lock(&state.mu);
    if (state.closed) return;  // Shutdown gave up on it; dropping `respond` answers
    ++state.in_handle;
  }
  state.handler->Handle(method, std::move(frame), std::move(respond));
  absl::MutexLock lock(&state.mu);
  --state.in_handle;
  state.changed.SignalAll();
}

}  // namespace

// ---------------------------------------------------------------- listeners and connections

absl::StatusOr<int> Servers::Listen(uint64_t server_id, std::shared_ptr<ServerState> state,
                                    const SocketAddress& address) {
  engine_.progress().AssertHeld();
  ServerRecord& server = servers_[server_id];
  server.servers = this;
  server.id = server_id;
  server.state = std::move(state);
  ucp_listener_params_t params{};
  params.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  params.sockaddr.addr = address.get();
  params.sockaddr.addrlen = address.length;
  params.conn_handler.cb = &Servers::OnConnRequest;
  params.conn_handler.arg = &server;  // std::map: stable until Remove, after the listener is gone
  ucs_status_t status = ucp_listener_create(engine_.workers().local(), &params, &server.listener);
  if (status != UCS_OK) {
    const std::string address_text = server.state->address;
    servers_.erase(server_id);
    return absl::UnavailableError(absl::StrCat("ucx: cannot listen on ", address_text, ": ", UcsText(status)));
  }
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  status = ucp_listener_query(server.listener, &attr);
  if (status != UCS_OK) {
    ucp_listener_destroy(server.listener);
    servers_.erase(server_id);
    return absl::UnavailableError(absl::StrCat("ucx: ucp_listener_query: ", UcsText(status)));
  }
  return PortOf(attr.sockaddr);
}

void Servers::OnConnRequest(ucp_conn_request_h request, void* arg) {
  const auto* server = static_cast<const ServerRecord*>(arg);
  Servers* servers = server->servers;
  servers->engine_.progress().AssertHeld();
  // Runs right after this ucp_worker_progress call, before any task could
  // destroy the listener.
  servers->engine_.Defer([servers, server_id = server->id, request] { servers->Accept(server_id, request); });
}

void Servers::Accept(uint64_t server_id, ucp_conn_request_h request) {
  engine_.progress().AssertHeld();
  auto it = servers_.find(server_id);
  if (it == servers_.end() || it->second.listener == nullptr) {
    LOG(WARNING) << "ucx: a connection request arrived for a server that is gone";
    return;
  }
  ServerRecord& server = it->second;
  bool accepting;
  {
    absl::MutexLock lock(&server.state->mu);
    accepting = server.state->accepting;
  }
  if (!accepting) {
    ucp_listener_reject(server.listener, request);
    return;
  }
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.conn_request = request;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Engine::OnEpError;
  params.err_handler.arg = &engine_;
  ucp_ep_h ep = nullptr;
  // On the listener's worker, as UCX requires; lanes are those both ends
  // offer, so a client from another network namespace gets no shared memory.
  const ucs_status_t status = ucp_ep_create(engine_.workers().local(), &params, &ep);
  if (status != UCS_OK) {
    LOG(WARNING) << "ucx: cannot accept a connection on " << server.state->address << ": " << UcsText(status);
    return;
  }
  const uint64_t conn_id = engine_.NewId();
  conns_[conn_id] = ServerConn{server_id, ep};
  server.conns.insert(conn_id);
  engine_.AddEndpoint(ep, EpOwner{/*client=*/false, conn_id});
}

void Servers::AcknowledgeHello(ucp_ep_h ep) {
  engine_.progress().AssertHeld();
  if (engine_.OwnerOf(ep) == nullptr) return;  // closed meanwhile
  AmHeader ack;
  ack.kind = static_cast<uint16_t>(Kind::kHelloAck);
  engine_.messages().Send(ep, ack, "", {});
}

void Servers::EndpointFailed(uint64_t conn_id) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;
  if (auto server = servers_.find(it->second.server_id); server != servers_.end()) {
    server->second.conns.erase(conn_id);
  }
  conns_.erase(it);
}

void Servers::StopListening(uint64_t server_id) {
  auto it = servers_.find(server_id);
  if (it == servers_.end() || it->second.listener == nullptr) return;
  ucp_listener_destroy(it->second.listener);
  it->second.listener = nullptr;
}

void Servers::CloseConns(uint64_t server_id) {
  engine_.progress().AssertHeld();
  auto it = servers_.find(server_id);
  if (it == servers_.end()) return;
  for (uint64_t conn_id : it->second.conns) {
    auto conn = conns_.find(conn_id);
    if (conn == conns_.end()) continue;
    engine_.CloseEndpoint(conn->second.ep, /*force=*/false);  // answers already queued go out first
    conns_.erase(conn);
  }
  it->second.conns.clear();
}

void Servers::Remove(uint64_t server_id) {
  StopListening(server_id);
  CloseConns(server_id);
  servers_.erase(server_id);
}

void Servers::CloseAll() {
  engine_.progress().AssertHeld();
  for (auto& [id, server] : servers_) {
    if (server.listener != nullptr) ucp_listener_destroy(server.listener);
    server.listener = nullptr;
  }
  for (auto& [id, conn] : conns_) engine_.CloseEndpoint(conn.ep, /*force=*/true);
  conns_.clear();
  servers_.clear();
}

// ---------------------------------------------------------------- requests and answers

void Servers::Deliver(ReceivedMessage message) {
  const uint64_t conn_id = message.server_conn_id;
  auto conn = conns_.find(conn_id);
  if (conn == conns_.end()) return;  // the client went away meanwhile
  std::shared_ptr<ServerState> state = servers_.at(conn->second.server_id).state;
  const uint64_t call_id = message.header.call_id;
  std::string method = message.text();
  absl::StatusOr<IncomingFrame> frame = FrameOf(message);
  if (!frame.ok()) {
    Reject(message.reply_ep, call_id,
           absl::InvalidArgumentError(absl::StrCat("ucx: malformed request for ", method, " on ", state->address, ": ",
                                                   frame.status().message())));
    return;
  }
  bool accepting;
  {
    absl::MutexLock lock(&state->mu);
    accepting = state->accepting;
    if (accepting) ++state->unanswered;
  }
  if (!accepting) {
    Reject(message.reply_ep, call_id,
           absl::UnavailableError(absl::StrCat("ucx: the server at ", state->address, " is shutting down")));
    return;
  }
  Responder respond = MakeResponder(state, conn_id, call_id);
  engine_.RunCallback(
      [state, method = std::move(method), frame = *std::move(frame), respond = std::move(respond)]() mutable {
        CallHandler(*state, method, std::move(frame), std::move(respond));
      });
}

void Servers::Reject(ucp_ep_h ep, uint64_t call_id, absl::Status status) {
  engine_.progress().AssertHeld();
  if (engine_.OwnerOf(ep) == nullptr) return;  // closed meanwhile
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kResponse);
  header.call_id = call_id;
  header.status_code = static_cast<int32_t>(status.code());
  engine_.messages().Send(ep, header, std::string(status.message()), {});
}

Responder Servers::MakeResponder(std::shared_ptr<ServerState> state, uint64_t conn_id, uint64_t call_id) {
  auto shared = std::make_shared<ResponderState>();
  shared->engine = engine_.weak_from_this();
  shared->server = std::move(state);
  shared->conn_id = conn_id;
  shared->call_id = call_id;
  return
      [shared](absl::Status status, OutgoingFrame response) { shared->Answer(std::move(status), std::move(response)); };
}

void Servers::SendResponse(uint64_t conn_id, uint64_t call_id, absl::Status status, OutgoingFrame frame) {
  engine_.progress().AssertHeld();
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;  // the client went away: drop the answer
  if (status.ok()) {
    const size_t bytes = EncodeWireHeader(frame.header).size() + frame.payload_bytes();
    if (static_cast<int64_t>(bytes) > engine_.max_message_bytes()) {
      status = absl::ResourceExhaustedError(
          absl::StrCat("ucx: answer of ", bytes, " bytes exceeds max_message_bytes ", engine_.max_message_bytes()));
    }
  }
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kResponse);
  header.call_id = call_id;
  header.status_code = static_cast<int32_t>(status.code());
  if (!status.ok()) frame = OutgoingFrame();  // an error carries no frame (as with gRPC)
  engine_.messages().Send(it->second.ep, header, std::string(status.message()), std::move(frame));
}

}  // namespace pstrain::ucx
