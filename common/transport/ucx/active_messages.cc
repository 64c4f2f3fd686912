// The engine's wire side: messages sent as active messages, and received
// back into whole messages (ActiveMessages, active_messages.h).
#include "common/transport/ucx/active_messages.h"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/transport/ucx/engine.h"
#include "common/transport/ucx/workers.h"
#include "glog/logging.h"

namespace pstrain::ucx {
namespace {

using ucx_wire::AmHeader;
using ucx_wire::Kind;

std::shared_ptr<char> Allocate(size_t n) {
  return std::shared_ptr<char>(n == 0 ? nullptr : new char[n], std::default_delete<char[]>());
}

// The AM header of an active message, if it is pstrain's and can be
// answered (`has_reply_ep`); otherwise logs why it is dropped.
std::optional<AmHeader> ParseAmHeader(const void* header, size_t header_length, bool has_reply_ep) {
  AmHeader h;
  if (header_length != sizeof(AmHeader) || header == nullptr) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message with an AM header of " << header_length << " bytes (expected "
                              << sizeof(AmHeader) << ")";
    return std::nullopt;
  }
  std::memcpy(&h, header, sizeof(h));
  if (h.magic != ucx_wire::kMagic) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message that is not pstrain's (magic 0x" << std::hex << h.magic << ")";
    return std::nullopt;
  }
  if (!has_reply_ep) {
    LOG_EVERY_N(WARNING, 100) << "ucx: dropped a message sent without a reply endpoint";
    return std::nullopt;
  }
  return h;
}

// Why a message whose AM header is `h` (and data `length` bytes) cannot be
// taken; empty if it can.
std::string Malformed(const AmHeader& h, size_t length) {
  if (h.version != ucx_wire::kVersion)
    return absl::StrCat("protocol version ", h.version, ", expected ", ucx_wire::kVersion);
  if (h.kind < static_cast<uint16_t>(Kind::kHello) || h.kind > static_cast<uint16_t>(Kind::kResponse)) {
    return absl::StrCat("unknown message kind ", h.kind);
  }
  if (h.text_bytes > length) return absl::StrCat("text of ", h.text_bytes, " bytes in ", length, " bytes of data");
  if (h.parts == 0 || h.part >= h.parts) return absl::StrCat("part ", h.part, " of a message of ", h.parts, " parts");
  if (h.part > 0 && h.text_bytes > 0) return absl::StrCat("text in part ", h.part, " (only part 0 has text)");
  if (h.part == 0 && h.payload_offset != ucx_wire::kNotInPayload) {
    return absl::StrCat("part 0 at payload offset ", h.payload_offset, " (it starts before the payload)");
  }
  if (h.kind == static_cast<uint16_t>(Kind::kRequest) && (h.call_id == 0 || (h.part == 0 && h.text_bytes == 0))) {
    return "request without a method or call id";
  }
  return "";
}

}  // namespace

absl::StatusOr<IncomingFrame> FrameOf(const ReceivedMessage& message) {
  std::vector<IncomingFrame::Piece> pieces;
  for (size_t p = 0; p < message.parts.size(); ++p) {
    const ucx_parts::ReceivedPart& part = message.parts[p];
    const size_t skip = p == 0 ? message.header.text_bytes : 0;
    if (part.length > skip) pieces.push_back({part.data.get() + skip, part.length - skip});
  }
  auto keepalive = std::make_shared<std::vector<ucx_parts::ReceivedPart>>(message.parts);
  absl::StatusOr<IncomingFrame> frame = IncomingFrame::FromWire(std::move(pieces), std::move(keepalive));
  if (!frame.ok()) return frame;
  PSTRAIN_RETURN_IF_ERROR(
      ucx_parts::CheckPayloadOffsets(message.parts, message.header.text_bytes, frame->payload_bytes()));
  return frame;
}

// ---------------------------------------------------------------- sending

void ActiveMessages::Send(ucp_ep_h ep, AmHeader header, std::string text, OutgoingFrame frame) {
  engine_.progress().AssertHeld();
  auto message = std::make_shared<OutgoingMessage>();
  header.text_bytes = static_cast<uint32_t>(text.size());
  message->text = std::move(text);
  const bool has_frame = header.kind == static_cast<uint16_t>(Kind::kRequest) ||
                         (header.kind == static_cast<uint16_t>(Kind::kResponse) && header.status_code == 0);
  if (has_frame) message->wire_header = EncodeWireHeader(frame.header);
  message->chunks = std::move(frame.chunks);
  std::vector<ucp_dt_iov_t> pieces;
  std::vector<uint64_t> payload_offsets;  // [piece]: where it starts in the payload
  uint64_t payload_bytes = 0;
  auto add = [&](const void* data, size_t size, bool in_payload) {
    if (size == 0) return;
    pieces.push_back(ucp_dt_iov_t{const_cast<void*>(data), size});
    payload_offsets.push_back(in_payload ? payload_bytes : ucx_wire::kNotInPayload);
    if (in_payload) payload_bytes += size;
  };
  add(message->text.data(), message->text.size(), false);
  add(message->wire_header.data(), message->wire_header.size(), false);
  for (const ConstChunk& chunk : message->chunks) add(chunk.data, chunk.size, has_frame);
  std::vector<size_t> sizes;
  for (const ucp_dt_iov_t& piece : pieces) sizes.push_back(piece.length);
  const std::vector<ucx_parts::PartSpan> spans = ucx_parts::SplitIntoParts(sizes);
  header.parts = static_cast<uint32_t>(spans.size());
  for (size_t p = 0; p < spans.size(); ++p) {
    auto op = std::make_unique<SendOp>();
    op->messages = this;
    op->header = header;
    op->header.part = static_cast<uint32_t>(p);
    if (p > 0) op->header.text_bytes = 0;  // the text starts part 0
    op->header.payload_offset = p > 0 ? payload_offsets[spans[p].first] : ucx_wire::kNotInPayload;
    op->message = message;
    op->iov.assign(pieces.begin() + spans[p].first, pieces.begin() + spans[p].first + spans[p].count);
    SendPart(ep, std::move(op));
  }
}

void ActiveMessages::SendPart(ucp_ep_h ep, std::unique_ptr<SendOp> op) {
  engine_.progress().AssertHeld();
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &ActiveMessages::OnSendDone;
  param.user_data = op.get();
  param.flags = UCP_AM_SEND_FLAG_REPLY;  // the receiver learns its endpoint to us
  const void* data = nullptr;
  size_t count = 0;
  if (op->iov.size() == 1) {
    // One contiguous buffer: UCX can move it zero-copy by rendezvous.
    param.datatype = ucp_dt_make_contig(1);
    data = op->iov[0].buffer;
    count = op->iov[0].length;
  } else {
    // An I/O vector of the pieces; no data at all (hello) is an empty contiguous buffer.
    param.datatype = op->iov.empty() ? ucp_dt_make_contig(1) : static_cast<ucp_datatype_t>(UCP_DATATYPE_IOV);
    data = op->iov.empty() ? nullptr : op->iov.data();
    count = op->iov.size();
  }
  void* request = ucp_am_send_nbx(ep, ucx_wire::kAmId, &op->header, sizeof(AmHeader), data, count, &param);
  if (request == nullptr) {
    SendFinished(std::move(op), UCS_OK);
  } else if (UCS_PTR_IS_ERR(request)) {
    SendFinished(std::move(op), UCS_PTR_STATUS(request));
  } else {
    op.release();  // owned by UCX until OnSendDone
    engine_.RequestStarted();
  }
}

void ActiveMessages::OnSendDone(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<SendOp> op(static_cast<SendOp*>(user_data));
  ActiveMessages* messages = op->messages;
  Engine& engine = messages->engine_;
  engine.progress().AssertHeld();
  ucp_request_free(request);
  engine.RequestDone();
  engine.Defer([messages, op = std::move(op), status]() mutable { messages->SendFinished(std::move(op), status); });
}

void ActiveMessages::SendFinished(std::unique_ptr<SendOp> op, ucs_status_t status) {
  engine_.progress().AssertHeld();
  // A failed send fails its call; the endpoint's error callback usually
  // follows with the same news for the other calls on it.
  if (status != UCS_OK && op->header.kind == static_cast<uint16_t>(Kind::kRequest)) {
    engine_.clients().RequestSendFailed(op->header.call_id, op->message->text, status);
  } else if (status != UCS_OK) {
    VLOG(1) << "ucx: sending a message of kind " << op->header.kind << " failed: " << UcsText(status);
  }
  // `op` (and with it the chunk owners) is released here.
}

// ---------------------------------------------------------------- receiving

ucs_status_t ActiveMessages::OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param) {
  const auto* w = static_cast<const UcpWorker*>(arg);
  return w->messages->Receive(w->worker, header, header_length, data, length, param);
}

ucs_status_t ActiveMessages::Receive(ucp_worker_h worker, const void* header, size_t header_length, void* data,
                                     size_t length, const ucp_am_recv_param_t* param) {
  engine_.progress().AssertHeld();
  const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
  ucp_ep_h reply_ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
  const std::optional<AmHeader> parsed = ParseAmHeader(header, header_length, reply_ep != nullptr);
  if (!parsed.has_value()) return UCS_OK;  // a rendezvous descriptor is dropped with it
  const AmHeader& h = *parsed;
  if (std::string why = Malformed(h, length); !why.empty()) {
    LOG_EVERY_N(WARNING, 100) << "ucx: malformed message: " << why;
    if (h.kind == static_cast<uint16_t>(Kind::kRequest) && h.call_id != 0) {
      engine_.Defer([this, reply_ep, call_id = h.call_id, why] {
        engine_.progress().AssertHeld();
        engine_.servers().Reject(reply_ep, call_id,
                                 absl::InvalidArgumentError(absl::StrCat("ucx: malformed request: ", why)));
      });
    }
    return UCS_OK;
  }
  switch (static_cast<Kind>(h.kind)) {
    case Kind::kHello:
      engine_.Defer([this, reply_ep] {
        engine_.progress().AssertHeld();
        engine_.servers().AcknowledgeHello(reply_ep);
      });
      return UCS_OK;
    case Kind::kHelloAck:
      engine_.Defer([this, reply_ep] {
        engine_.progress().AssertHeld();
        engine_.clients().Connected(reply_ep);
      });
      return UCS_OK;
    case Kind::kRequest:
    case Kind::kResponse:
      return ReceiveData(worker, h, reply_ep, data, length, rndv);
  }
  return UCS_OK;
}

ucs_status_t ActiveMessages::ReceiveData(ucp_worker_h worker, const AmHeader& h, ucp_ep_h reply_ep, void* data,
                                         size_t length, bool rndv) {
  uint64_t server_conn_id = 0;
  if (!Admit(h, reply_ep, length, &server_conn_id)) return UCS_OK;  // a rendezvous descriptor is dropped with it
  auto op = std::make_unique<RecvOp>();
  op->messages = this;
  op->worker = worker;
  op->header = h;
  op->reply_ep = reply_ep;
  op->server_conn_id = server_conn_id;
  op->length = length;
  PlaceData(*op);
  if (rndv) return ReceiveRendezvous(std::move(op), data);
  // Eager: the bytes are UCX's until we return; keep a copy.
  if (length > 0) std::memcpy(op->data.get(), data, length);
  DeferReceived(std::move(op));
  return UCS_OK;
}

void ActiveMessages::PlaceData(RecvOp& op) {
  engine_.progress().AssertHeld();
  const AmHeader& h = op.header;
  if (h.kind == static_cast<uint16_t>(Kind::kResponse) && h.status_code == 0 &&
      h.payload_offset != ucx_wire::kNotInPayload && op.length > 0) {
    if (void* place = engine_.clients().ReceiveInPlace(h.call_id, h.payload_offset, op.length)) {
      op.data = std::shared_ptr<char>(static_cast<char*>(place), [](char*) {});  // the caller's
      op.in_place = true;
      return;
    }
  }
  op.data = Allocate(op.length);
}

bool ActiveMessages::Admit(const AmHeader& h, ucp_ep_h reply_ep, size_t length, uint64_t* server_conn_id) {
  engine_.progress().AssertHeld();
  const bool request = h.kind == static_cast<uint16_t>(Kind::kRequest);
  const ucx_parts::MessageKey key{reply_ep, h.kind, h.call_id};
  if (!request && !engine_.clients().Expects(h.call_id)) {
    if (h.parts > 1) assembler_.Forget(key);  // parts that arrived before it completed
    return false;                             // late answer: its call completed
  }
  if (request) {
    const EpOwner* owner = engine_.OwnerOf(reply_ep);
    if (owner == nullptr || owner->client) {
      LOG_EVERY_N(WARNING, 100) << "ucx: dropped a request that came on no open server connection";
      return false;
    }
    *server_conn_id = owner->conn_id;
  }
  absl::Status refusal;
  bool quiet = false;
  if (h.parts > 1) {
    refusal = assembler_.Announce(key, h.part, h.parts, length, &quiet);
  } else if (static_cast<int64_t>(length) > engine_.max_message_bytes()) {
    refusal = absl::ResourceExhaustedError(absl::StrCat(
        "ucx: received a message of ", length, " bytes, larger than max_message_bytes ", engine_.max_message_bytes()));
  }
  if (refusal.ok()) return true;
  if (!quiet) {
    engine_.Defer([this, h, reply_ep, refusal] { Refuse(h, reply_ep, refusal); });
  }
  return false;
}

ucs_status_t ActiveMessages::ReceiveRendezvous(std::unique_ptr<RecvOp> op, void* data) {
  engine_.progress().AssertHeld();
  // Pull the data into our buffer.
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = &ActiveMessages::OnRecvDone;
  param.user_data = op.get();
  void* buffer = op->data.get();
  void* request_handle = ucp_am_recv_data_nbx(op->worker, data, buffer, op->length, &param);
  if (request_handle == nullptr) {
    DeferReceived(std::move(op));
  } else if (UCS_PTR_IS_ERR(request_handle)) {
    const std::string why = absl::StrCat("ucx: receiving a message failed: ", UcsText(UCS_PTR_STATUS(request_handle)));
    LOG(WARNING) << why;
    if (op->header.kind != static_cast<uint16_t>(Kind::kRequest)) {
      engine_.Defer([this, call_id = op->header.call_id, in_place = op->in_place, why] {
        engine_.progress().AssertHeld();
        if (in_place) engine_.clients().ReceivedInPlace(call_id);
        engine_.clients().Complete(call_id, absl::UnavailableError(why));
      });
    }
  } else {
    op.release();  // owned by UCX until OnRecvDone
    engine_.RequestStarted();
  }
  return UCS_INPROGRESS;  // UCX owns the descriptor now
}

void ActiveMessages::OnRecvDone(void* request, ucs_status_t status, size_t length, void* user_data) {
  std::unique_ptr<RecvOp> op(static_cast<RecvOp*>(user_data));
  ActiveMessages* messages = op->messages;
  messages->engine_.progress().AssertHeld();
  ucp_request_free(request);
  messages->engine_.RequestDone();
  if (status != UCS_OK) {
    // The sender's endpoint failed or was closed; its error handling covers the call.
    VLOG(1) << "ucx: receiving a message failed: " << UcsText(status);
    if (op->in_place) {
      messages->engine_.Defer([messages, call_id = op->header.call_id] {
        messages->engine_.progress().AssertHeld();
        messages->engine_.clients().ReceivedInPlace(call_id);
      });
    }
    return;
  }
  messages->DeferReceived(std::move(op));
}

void ActiveMessages::DeferReceived(std::unique_ptr<RecvOp> op) {
  engine_.progress().AssertHeld();
  engine_.Defer([this, op = std::move(op)]() mutable { Received(std::move(op)); });
}

void ActiveMessages::Received(std::unique_ptr<RecvOp> op) {
  engine_.progress().AssertHeld();
  if (op->in_place) engine_.clients().ReceivedInPlace(op->header.call_id);
  ReceivedMessage message;
  message.header = op->header;
  message.reply_ep = op->reply_ep;
  message.server_conn_id = op->server_conn_id;
  ucx_parts::ReceivedPart part{std::move(op->data), op->length, op->header.text_bytes, op->header.payload_offset};
  if (op->header.parts > 1) {
    const ucx_parts::MessageKey key{op->reply_ep, op->header.kind, op->header.call_id};
    message.parts = assembler_.Complete(key, op->header.part, std::move(part));
    if (message.parts.empty()) return;                        // more to come, or refused meanwhile
    message.header.text_bytes = message.parts[0].text_bytes;  // the text starts part 0
  } else {
    message.parts.push_back(std::move(part));
  }
  if (message.header.kind == static_cast<uint16_t>(Kind::kRequest)) {
    engine_.servers().Deliver(std::move(message));
  } else {
    engine_.clients().Deliver(std::move(message));
  }
}

void ActiveMessages::Refuse(const AmHeader& h, ucp_ep_h reply_ep, const absl::Status& refusal) {
  engine_.progress().AssertHeld();
  const bool request = h.kind == static_cast<uint16_t>(Kind::kRequest);
  absl::Status status = refusal;
  if (refusal.code() == absl::StatusCode::kInvalidArgument) {
    LOG_EVERY_N(WARNING, 100) << "ucx: malformed message: " << refusal.message();
    status = request ? absl::InvalidArgumentError(absl::StrCat("ucx: malformed request: ", refusal.message()))
                     : absl::InternalError(absl::StrCat("ucx: malformed answer: ", refusal.message()));
  }
  if (request) {
    engine_.servers().Reject(reply_ep, h.call_id, status);
  } else {
    engine_.clients().Complete(h.call_id, status);
  }
}

}  // namespace pstrain::ucx
