// The wire side of the ucx transport: one message (a request, a response, a
// hello) sent as one or more active messages, and received back into a
// whole message (the protocol: ucx_wire in ucx_transport.h; the split into
// parts: message_parts.h): class ActiveMessages, and the objects it hands
// to UCX and gets back.
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
// a pipeline over TCP). A part of an answer that the call wants in place
// (CallOptions::receive_into, by the part's payload_offset) is received
// straight into the caller's memory instead, so reading the answer copies
// nothing. UCX callbacks only record what happened and defer the work
// (Engine::Defer): nothing re-enters our state from inside UCX.
//
// A whole message goes to its side: a response to the client's calls
// (client.h), a request to the servers (server.h), a hello to the servers,
// its acknowledgement to the client. A malformed message never reaches
// either: a request is answered INVALID_ARGUMENT, anything else is logged
// and dropped.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/transport/frame.h"
#include "common/transport/ucx/message_parts.h"
#include "common/transport/ucx/ucx_transport.h"

namespace pstrain::ucx {

class ActiveMessages;
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
  ActiveMessages* messages = nullptr;
  ucx_wire::AmHeader header;
  std::shared_ptr<const OutgoingMessage> message;
  std::vector<ucp_dt_iov_t> iov;
};

// One message being received (by rendezvous, or copied from an eager one).
struct RecvOp {
  ActiveMessages* messages = nullptr;
  ucp_worker_h worker = nullptr;  // the worker it arrived on, which pulls a rendezvous
  ucx_wire::AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;  // requests: the connection it came on
  std::shared_ptr<char> data;   // header.text_bytes of text, then (part of) the wire frame
  size_t length = 0;
  bool in_place = false;  // `data` is the caller's memory (ClientCalls::ReceiveInPlace)
};

// A whole message: its parts' data in order (one part unless the sender
// split it); part 0 starts with `text_bytes` of text, the rest is the wire
// frame. The header is part 0's. A part may lie in the caller's memory
// (received in place, client.h).
struct ReceivedMessage {
  ucx_wire::AmHeader header;
  ucp_ep_h reply_ep = nullptr;
  uint64_t server_conn_id = 0;
  std::vector<ucx_parts::ReceivedPart> parts;

  std::string text() const { return std::string(parts[0].data.get(), header.text_bytes); }
};

// The wire frame that follows the text in `message`'s parts; the frame keeps
// the parts' buffers alive. INVALID_ARGUMENT when a part's payload_offset
// is not where it lies (it may have been received in place by it).
absl::StatusOr<IncomingFrame> FrameOf(const ReceivedMessage& message);

// Sends and receives the messages of one engine. Every function runs on
// the engine's progress thread only (the UCX callbacks are called there by
// ucp_worker_progress); each starts with engine.progress().AssertHeld().
class ActiveMessages {
 public:
  ActiveMessages(Engine& engine, int64_t max_message_bytes) : engine_(engine), assembler_(max_message_bytes) {}

  // Sends `text`, then `frame` (requests, and responses with status code 0)
  // to `ep` as one or more parts. A failed request send fails its call.
  void Send(ucp_ep_h ep, ucx_wire::AmHeader header, std::string text, OutgoingFrame frame);
  // Forgets the parts of messages that came on `ep` (being closed).
  void ForgetEndpoint(ucp_ep_h ep) { assembler_.ForgetEndpoint(ep); }

  // The AM handler of every worker (its argument: the UcpWorker, workers.h).
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param);

 private:
  static void OnSendDone(void* request, ucs_status_t status, void* user_data);
  static void OnRecvDone(void* request, ucs_status_t status, size_t length, void* user_data);
  // Sends one part of a message Send split.
  void SendPart(ucp_ep_h ep, std::unique_ptr<SendOp> op);
  void SendFinished(std::unique_ptr<SendOp> op, ucs_status_t status);
  // A message that arrived on `worker`.
  ucs_status_t Receive(ucp_worker_h worker, const void* header, size_t header_length, void* data, size_t length,
                       const ucp_am_recv_param_t* param);
  ucs_status_t ReceiveData(ucp_worker_h worker, const ucx_wire::AmHeader& header, ucp_ep_h reply_ep, void* data,
                           size_t length, bool rndv);
  // Whether the data of a request or response whose AM header is `h` is to
  // be received: not a late answer, a request on an open server connection
  // (*server_conn_id), a size and part the limits allow. Otherwise the
  // message is dropped (refused where it is answered).
  bool Admit(const ucx_wire::AmHeader& h, ucp_ep_h reply_ep, size_t length, uint64_t* server_conn_id);
  // Where op's data goes: the caller's memory when an answer's part is
  // wanted in place, otherwise a new buffer.
  void PlaceData(RecvOp& op);
  // Pulls the data of a message that came by rendezvous (`data`: UCX's
  // descriptor, of op's worker) into op's buffer.
  ucs_status_t ReceiveRendezvous(std::unique_ptr<RecvOp> op, void* data);
  void DeferReceived(std::unique_ptr<RecvOp> op);
  void Received(std::unique_ptr<RecvOp> op);
  // A message could not be taken (too large, or PartAssembler::Announce's
  // refusal): a request is answered with it, an answer completes its call
  // with it (INTERNAL where the answer was malformed).
  void Refuse(const ucx_wire::AmHeader& h, ucp_ep_h reply_ep, const absl::Status& refusal);

  Engine& engine_;
  ucx_parts::PartAssembler assembler_;
};

}  // namespace pstrain::ucx
