// The wire side of the ucx transport: one message (a request, a response, a
// hello) sent as one or more active messages, and received back into a
// whole message (the protocol: ucx_wire in ucx_transport.h; the split into
// parts: message_parts.h). Engine's functions of this side are defined in
// active_messages.cc; these are the objects they hand to UCX and get back.
//
// Sending. Every chunk of at least 256 KiB is a part of its own, sent from
// its contiguous buffer so that UCX can move it zero-copy; the pieces between
// them are parts handed to UCX as I/O vectors (UCP_DATATYPE_IOV). Every part
// is sent with UCP_AM_SEND_FLAG_REPLY, so the receiver learns its endpoint
// back to the sender. Nothing UCX reads (header, I/O vector, text, chunks) is
// released before UCX reports the part's send complete or failed.
//
// Receiving. The receiver keeps each part in its own buffer; the frame's
// payload pieces are those buffers. UCX sends a message below its rendezvous
// threshold eagerly (the bytes travel with the AM; the receiver copies them
// out of UCX's buffer in the AM callback); a larger one by rendezvous: only a
// descriptor arrives, the receiver allocates the part and pulls it with
// ucp_am_recv_data_nbx, which UCX carries out zero-copy where the transport
// can (RDMA read/write on InfiniBand/RoCE, cross-memory attach within a host,
// a pipeline over TCP). UCX callbacks only record what happened and defer the
// work (Engine::Defer): nothing re-enters our state from inside UCX.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/transport/frame.h"
#include "common/transport/ucx/message_parts.h"
#include "common/transport/ucx/ucx_transport.h"

namespace pstrain::ucx {

class Engine;

// One message being sent, shared by its parts (message_parts.h): owns the
// bytes UCX reads until every part's send completed.
struct OutgoingMessage {
  std::string text;
  std::string wire_header;
  std::vector<ConstChunk> chunks;  // owners released when the last part is done
};

// One active message (a part of a message) being sent; owns everything UCX
// reads until the send completes (the header and I/O vector too: UCX 1.13
// reads them until then).
struct SendOp {
  Engine* engine = nullptr;
  ucx_wire::AmHeader header;
  std::shared_ptr<const OutgoingMessage> message;
  std::vector<ucp_dt_iov_t> iov;
};

// One message being received (by rendezvous, or copied from an eager one).
struct RecvOp {
  Engine* engine = nullptr;
  ucp_worker_h worker = nullptr;  // the worker it arrived on, which pulls a rendezvous
  ucx_wire::AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;  // requests: the connection it came on
  std::shared_ptr<char> data;   // header.text_bytes of text, then (part of) the wire frame
  size_t length = 0;
};

// A whole message: its parts' data in order (one part unless the sender
// split it); part 0 starts with `text_bytes` of text, the rest is the wire
// frame. The header is part 0's.
struct ReceivedMessage {
  ucx_wire::AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;
  std::vector<ucx_parts::ReceivedPart> parts;

  std::string text() const { return std::string(parts[0].data.get(), header.text_bytes); }
};

// The wire frame that follows the text in `message`'s parts; the frame keeps
// the parts' buffers alive.
absl::StatusOr<IncomingFrame> FrameOf(const ReceivedMessage& message);

}  // namespace pstrain::ucx
