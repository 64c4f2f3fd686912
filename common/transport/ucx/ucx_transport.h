// UcxTransport ("ucx"): frames as UCX active messages -- RDMA on InfiniBand
// and RoCE, shared memory or TCP elsewhere -- with the semantics of "grpc"
// (transport.h): every call has a deadline, a dead peer completes calls with
// UNAVAILABLE, handlers may answer later from any thread. How it works, why,
// and what was measured: docs/TRANSPORTS.md.
//
// Contract:
// - No `security`: UCX offers neither encryption nor peer authentication, so
//   a config that asks for TLS or a token with transport ucx is refused
//   before anything starts (security.h, TransportSupportsSecurity).
// - Threads: one progress thread per Transport object drives UCX; Serve()
//   and Connect() of one transport share it. Handlers and completion
//   callbacks run on a small pool of callback threads, never with a lock
//   held. Destroy the transport, and shut servers down, from threads of your
//   own, never from a handler or callback; channels and servers may outlive
//   the transport (their calls then fail UNAVAILABLE).
// - Configuration: every UCX_* environment variable applies (UCX_TLS,
//   UCX_NET_DEVICES, UCX_RNDV_THRESH, UCX_LOG_LEVEL, ...). The first
//   transport of a process sets UCX_MM_ERROR_HANDLING=y,
//   UCX_TCP_CM_REUSEADDR=y and UCX_RNDV_SCHEME=get_zcopy unless they are set
//   (process_settings.h). PSTRAIN_UCX_SPIN_US (default 200): how long the
//   progress thread polls after activity before it sleeps.
// - CallOptions::receive_into is honoured: a part of an answer whose payload
//   range the caller names is received straight there (client.h), unless
//   PSTRAIN_UCX_RECEIVE_IN_PLACE=0.
// - Sanitizer builds must start with UCX_MEM_MMAP_HOOK_MODE=none
//   UCX_MEM_MALLOC_HOOKS=no; otherwise Connect and Serve fail with
//   FAILED_PRECONDITION saying so, instead of the process crashing.
// - Errors: a call whose deadline passes completes DEADLINE_EXCEEDED naming
//   method, address and deadline (a later answer is dropped). No server at
//   the address: UNAVAILABLE "ucx: cannot reach <address>: <UCX status>"
//   (wait_for_ready calls are retried with backoff until their deadline,
//   never delivered twice). A connection that fails later completes every
//   call on it UNAVAILABLE "ucx: connection to <address> lost: ..."; the next
//   call reconnects. A request larger than max_message_bytes is refused on
//   the sender with RESOURCE_EXHAUSTED. A malformed message never reaches
//   the Handler: a request is answered INVALID_ARGUMENT, anything else is
//   logged and dropped.
// - Both ends must be the same byte order.
//
// Inside (headers internal to this directory, one concept each): engine.h
// (the progress thread), workers.h (UCP contexts and workers),
// active_messages.h (the wire side), client.h (calls, connecting),
// server.h (listeners, responders), address.h, process_settings.h;
// message_parts.h (frames split into parts).
#pragma once

#include <cstdint>
#include <memory>

#include "common/transport/transport.h"

namespace pstrain {

std::unique_ptr<Transport> CreateUcxTransport(const TransportOptions& options);

// The active-message protocol, public for tests that speak it directly.
namespace ucx_wire {

// The AM id of every pstrain message.
inline constexpr unsigned kAmId = 23;
inline constexpr uint32_t kMagic = 0x50535458;  // "PSTX"
inline constexpr uint16_t kVersion = 3;         // 3: AmHeader::payload_offset

enum class Kind : uint16_t {
  kHello = 1,     // client -> server on a new endpoint; no data
  kHelloAck = 2,  // server -> client: the endpoint is connected
  kRequest = 3,   // data: method (text_bytes), then the wire frame
  kResponse = 4,  // data: status message (text_bytes), then the wire frame if status_code is 0
};

// AmHeader::payload_offset of a part that does not start in the payload.
inline constexpr uint64_t kNotInPayload = UINT64_MAX;

// The AM header (ucp_am_send_nbx's header argument), in host byte order.
struct AmHeader {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t kind = 0;        // a Kind
  uint64_t call_id = 0;     // chosen by the client, echoed by the response
  int32_t status_code = 0;  // responses: an absl::StatusCode
  uint32_t text_bytes = 0;  // length of the text that starts the data (part 0 only)
  uint32_t part = 0;        // this message's index among the parts of one frame
  uint32_t parts = 1;       // how many active messages carry the frame (message_parts.h)
  // Where this part's data starts in the frame's payload (after the wire
  // header), or kNotInPayload for a part that starts before the payload
  // (part 0). A receiver may put the part where its call wants those bytes
  // (CallOptions::receive_into); a wrong offset makes the answer malformed.
  uint64_t payload_offset = kNotInPayload;
};
static_assert(sizeof(AmHeader) == 40, "AmHeader is part of the wire format");

}  // namespace ucx_wire
}  // namespace pstrain
