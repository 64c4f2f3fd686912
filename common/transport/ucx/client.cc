// The client side: calls, and the connection state machine of each channel
// (ClientCalls, client.h).
#include "common/transport/ucx/client.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/transport/ucx/engine.h"
#include "common/transport/ucx/workers.h"
#include "glog/logging.h"

namespace pstrain::ucx {

using ucx_wire::AmHeader;
using ucx_wire::Kind;

// ---------------------------------------------------------------- calls

void ClientCalls::Start(uint64_t call_id, std::unique_ptr<PendingCall> call, const std::string& address,
                        const SocketAddress& peer) {
  engine_.progress().AssertHeld();
  if (call->deadline <= absl::Now()) {
    const std::string message = absl::StrCat("ucx: ", call->method, " to ", address, " not started: its deadline ",
                                             absl::FormatTime(call->deadline), " had passed");
    engine_.RunCallback([completion = std::move(call->completion), message]() mutable {
      completion.Run(absl::DeadlineExceededError(message), {});
    });
    return;
  }
  auto [conn_it, created] = conns_.try_emplace(call->conn_id);
  ClientConn& conn = conn_it->second;
  if (created) {
    conn.address = address;
    conn.peer = peer;
  }
  const bool wait_for_ready = call->wait_for_ready;
  if (call->deadline != absl::InfiniteFuture()) deadlines_.emplace(call->deadline, call_id);
  calls_.emplace(call_id, std::move(call));
  SendOrQueue(conn_it->first, conn, call_id, wait_for_ready);
}

void ClientCalls::SendOrQueue(uint64_t conn_id, ClientConn& conn, uint64_t call_id, bool wait_for_ready) {
  switch (conn.state) {
    case ClientConn::State::kReady:
      SendRequest(conn, call_id);
      return;
    case ClientConn::State::kConnecting:
      conn.waiting.insert(call_id);
      return;
    case ClientConn::State::kIdle:
      if (conn.retry_at != absl::InfiniteFuture()) {
        // Backing off after a failed attempt: only wait_for_ready calls wait.
        if (!wait_for_ready) {
          Complete(call_id, absl::UnavailableError(conn.last_error));
          return;
        }
        conn.waiting.insert(call_id);
        return;
      }
      conn.waiting.insert(call_id);
      Connect(conn_id, conn);
      return;
  }
}

void ClientCalls::SendRequest(ClientConn& conn, uint64_t call_id) {
  engine_.progress().AssertHeld();
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;  // completed meanwhile
  PendingCall& call = *it->second;
  conn.sent.insert(call_id);
  AmHeader header;
  header.kind = static_cast<uint16_t>(Kind::kRequest);
  header.call_id = call_id;
  engine_.messages().Send(conn.ep, header, call.method, std::move(call.request));
}

void ClientCalls::RequestSendFailed(uint64_t call_id, const std::string& method, ucs_status_t status) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  auto conn = conns_.find(it->second->conn_id);
  const std::string address = conn == conns_.end() ? std::string("?") : conn->second.address;
  Complete(call_id, absl::UnavailableError(
                        absl::StrCat("ucx: sending ", method, " to ", address, " failed: ", UcsText(status))));
}

bool ClientCalls::Expects(uint64_t call_id) const {
  auto it = calls_.find(call_id);
  return it != calls_.end() && !it->second->held.has_value();
}

void* ClientCalls::ReceiveInPlace(uint64_t call_id, uint64_t offset, size_t bytes) {
  auto it = calls_.find(call_id);
  if (it == calls_.end() || it->second->held.has_value() || !it->second->receive_into) return nullptr;
  void* place = it->second->receive_into(offset, bytes);
  if (place != nullptr) ++it->second->receiving_in_place;
  return place;
}

void ClientCalls::ReceivedInPlace(uint64_t call_id) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  PendingCall& call = *it->second;
  if (--call.receiving_in_place > 0 || !call.held.has_value()) return;
  absl::Status held = *std::move(call.held);
  call.held.reset();
  Complete(call_id, std::move(held));
}

void ClientCalls::Deliver(ReceivedMessage message) {
  const uint64_t call_id = message.header.call_id;
  auto it = calls_.find(call_id);
  if (it == calls_.end() || it->second->held.has_value()) return;  // completed meanwhile (deadline)
  const ClientConn& conn = conns_.at(it->second->conn_id);
  if (conn.ep != message.reply_ep) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped an answer to call " << call_id << " that came from another endpoint";
    return;
  }
  const int code = message.header.status_code;
  if (code != 0) {
    const bool known = code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated);
    Complete(call_id,
             absl::Status(known ? static_cast<absl::StatusCode>(code) : absl::StatusCode::kUnknown, message.text()));
    return;
  }
  absl::StatusOr<IncomingFrame> frame = FrameOf(message);
  if (!frame.ok()) {
    Complete(call_id, absl::InternalError(
                          absl::StrCat("ucx: malformed answer from ", conn.address, ": ", frame.status().message())));
    return;
  }
  Complete(call_id, absl::OkStatus(), *std::move(frame));
}

void ClientCalls::Complete(uint64_t call_id, absl::Status status, IncomingFrame frame) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return;
  if (PendingCall& call = *it->second; call.receiving_in_place > 0) {
    // Only a failure comes before the answer's parts are in: held until
    // they are, or until the grace ends and the connection closes.
    if (!call.held.has_value()) {
      call.held = std::move(status);
      call.grace_ends = absl::Now() + kInPlaceGrace;
      deadlines_.emplace(call.grace_ends, call_id);
    }
    return;
  }
  auto node = calls_.extract(it);
  std::unique_ptr<PendingCall> call = std::move(node.mapped());
  if (auto conn = conns_.find(call->conn_id); conn != conns_.end()) {
    conn->second.waiting.erase(call_id);
    conn->second.sent.erase(call_id);
  }
  engine_.RunCallback([completion = std::move(call->completion), status = std::move(status),
                       frame = std::move(frame)]() mutable { completion.Run(std::move(status), std::move(frame)); });
  // An unsent request (and its chunk owners) is released here.
}

void ClientCalls::ExpireCalls(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const uint64_t call_id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = calls_.find(call_id);
    if (it == calls_.end()) continue;
    const PendingCall& call = *it->second;
    auto conn_it = conns_.find(call.conn_id);
    if (call.held.has_value()) {
      // Its grace is over: the connection goes, and with it the parts on
      // their way (a destroyed channel's endpoint is closing already).
      if (now < call.grace_ends || conn_it == conns_.end()) continue;
      ClientConn& conn = conn_it->second;
      DropEndpoint(conn, absl::StrCat("ucx: an answer to ", call.method, " from ", conn.address,
                                      " was still arriving into the caller's memory ",
                                      absl::FormatDuration(kInPlaceGrace), " after the call ended"));
      continue;
    }
    const ClientConn& conn = conn_it->second;
    std::string message = absl::StrCat("ucx: ", call.method, " to ", conn.address, " exceeded its deadline ",
                                       absl::FormatTime(call.deadline), " (",
                                       absl::FormatDuration(call.deadline - call.started), " after it started)");
    if (conn.state != ClientConn::State::kReady) {
      absl::StrAppend(&message, "; not connected",
                      conn.last_error.empty() ? "" : absl::StrCat(" (last attempt: ", conn.last_error, ")"));
    }
    Complete(call_id, absl::DeadlineExceededError(message));
  }
}

absl::Time ClientCalls::NextWake(absl::Time wake) const {
  if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
  for (const auto& [id, conn] : conns_) wake = std::min(wake, conn.retry_at);
  return wake;
}

// ---------------------------------------------------------------- connections

void ClientCalls::Connect(uint64_t conn_id, ClientConn& conn) {
  engine_.progress().AssertHeld();
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  params.sockaddr.addr = conn.peer.get();
  params.sockaddr.addrlen = conn.peer.length;
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &Engine::OnEpError;
  params.err_handler.arg = &engine_;
  ucp_ep_h ep = nullptr;
  const ucs_status_t status = ucp_ep_create(engine_.workers().For(conn.peer, conn.address), &params, &ep);
  if (status != UCS_OK) {
    ConnectFailed(conn, absl::StrCat("ucx: cannot reach ", conn.address, ": ", UcsText(status)));
    return;
  }
  conn.ep = ep;
  conn.state = ClientConn::State::kConnecting;
  engine_.AddEndpoint(ep, EpOwner{/*client=*/true, conn_id});
  AmHeader hello;
  hello.kind = static_cast<uint16_t>(Kind::kHello);
  engine_.messages().Send(ep, hello, "", {});
}

void ClientCalls::ConnectFailed(ClientConn& conn, const std::string& why) {
  conn.ep = nullptr;
  conn.state = ClientConn::State::kIdle;
  conn.last_error = why;
  const std::vector<uint64_t> waiting(conn.waiting.begin(), conn.waiting.end());
  for (uint64_t id : waiting) {
    auto it = calls_.find(id);
    if (it != calls_.end() && !it->second->wait_for_ready) Complete(id, absl::UnavailableError(why));
  }
  if (conn.waiting.empty()) {
    conn.retry_at = absl::InfiniteFuture();  // the next call tries again at once
    conn.backoff = kFirstBackoff;
    return;
  }
  conn.retry_at = absl::Now() + conn.backoff;
  conn.backoff = std::min(conn.backoff * 2, kMaxBackoff);
}

void ClientCalls::Connected(ucp_ep_h ep) {
  engine_.progress().AssertHeld();
  const EpOwner* owner = engine_.OwnerOf(ep);
  if (owner == nullptr || !owner->client) return;
  ClientConn& conn = conns_.at(owner->conn_id);
  if (conn.state != ClientConn::State::kConnecting) return;
  conn.state = ClientConn::State::kReady;
  conn.backoff = kFirstBackoff;
  conn.last_error.clear();
  const std::set<uint64_t> waiting = std::move(conn.waiting);
  conn.waiting.clear();
  for (uint64_t id : waiting) SendRequest(conn, id);
}

void ClientCalls::RetryConnections(absl::Time now) {
  for (auto& [id, conn] : conns_) {
    if (conn.state != ClientConn::State::kIdle || conn.retry_at > now) continue;
    conn.retry_at = absl::InfiniteFuture();
    if (!conn.waiting.empty()) Connect(id, conn);
  }
}

void ClientCalls::EndpointFailed(uint64_t conn_id, ucs_status_t status) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;
  ClientConn& conn = it->second;
  if (conn.state == ClientConn::State::kConnecting) {
    ConnectFailed(conn, absl::StrCat("ucx: cannot reach ", conn.address, ": ", UcsText(status)));
    return;
  }
  const std::string why = absl::StrCat("ucx: connection to ", conn.address, " lost: ", UcsText(status));
  conn.ep = nullptr;
  conn.state = ClientConn::State::kIdle;  // the next call reconnects
  const std::vector<uint64_t> sent(conn.sent.begin(), conn.sent.end());
  for (uint64_t id : sent) Complete(id, absl::UnavailableError(why));
}

void ClientCalls::DropEndpoint(ClientConn& conn, const std::string& why) {
  engine_.progress().AssertHeld();
  LOG(WARNING) << why << "; closing the connection";
  if (conn.ep != nullptr) engine_.CloseEndpoint(conn.ep, /*force=*/true);  // fails the parts on their way
  conn.ep = nullptr;
  conn.state = ClientConn::State::kIdle;  // the next call reconnects
  const std::vector<uint64_t> sent(conn.sent.begin(), conn.sent.end());
  for (uint64_t id : sent) Complete(id, absl::UnavailableError(why));
}

void ClientCalls::CloseConn(uint64_t conn_id) {
  engine_.progress().AssertHeld();
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;
  ClientConn& conn = it->second;
  std::vector<uint64_t> calls(conn.waiting.begin(), conn.waiting.end());
  calls.insert(calls.end(), conn.sent.begin(), conn.sent.end());
  for (uint64_t id : calls) {
    Complete(id, absl::CancelledError(absl::StrCat("ucx: the channel to ", conn.address, " was destroyed")));
  }
  if (conn.ep != nullptr) engine_.CloseEndpoint(conn.ep, /*force=*/false);
  conns_.erase(it);
}

void ClientCalls::CloseAll() {
  engine_.progress().AssertHeld();
  for (auto& [id, conn] : conns_) {
    if (conn.ep != nullptr) {
      engine_.CloseEndpoint(conn.ep, /*force=*/true);
      conn.ep = nullptr;
    }
  }
  // Every endpoint is closed: no part arrives in place any more.
  for (auto& [id, call] : calls_) call->receiving_in_place = 0;
  while (!calls_.empty()) Complete(calls_.begin()->first, absl::UnavailableError("ucx: the transport shut down"));
  conns_.clear();
}

}  // namespace pstrain::ucx
