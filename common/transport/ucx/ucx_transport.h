// UcxTransport ("ucx"): frames as UCX active messages -- RDMA on InfiniBand
// and RoCE, shared memory or TCP elsewhere -- with the semantics of "grpc"
// (transport.h): every call has a deadline, a dead peer completes calls with
// UNAVAILABLE, handlers may answer later from any thread.
//
// Security. UCX offers neither encryption nor peer authentication: any
// process that reaches the listener's port (TCP, or the RDMA fabric) can
// call, and bytes travel as they are. This transport therefore carries no
// `security` (TLS, token): a config that asks for it with transport ucx is
// refused before anything starts (security.h, TransportSupportsSecurity).
// Isolate the fabric instead (InfiniBand partitions, RoCE VLANs;
// docs/SECURITY.md).
//
// Threads. One UCP context (features AM and WAKEUP) and one UCP worker per
// Transport object, driven by one progress thread the transport owns; Serve()
// and Connect() of one transport share them. No other thread calls UCX (the
// one exception is ucp_worker_signal, which UCX allows from any thread):
// Channel::Call, responders and Server::Shutdown queue work for the progress
// thread and wake it. When idle the progress thread sleeps until UCX has an
// event, work is queued, or a deadline or reconnection attempt is due (at
// most 1 s); a UCX busy with itself (as around a peer that died) holds
// neither queued work nor deadlines up (engine.h says how).
// Handlers and completion callbacks run on a small pool of callback threads,
// never on the progress thread and never with a lock held: a handler may
// block briefly (it delays only other handlers), and a slow callback never
// stalls communication. Destroy the transport, and shut servers down, from
// threads of your own, never from a handler or callback; channels and
// servers may outlive the transport (their calls then fail UNAVAILABLE).
//
// Wire. Each message is one or more active messages (ucp_am_send_nbx, AM id
// ucx_wire::kAmId), each with a fixed 32-byte AM header (ucx_wire::AmHeader:
// kind, call id, status code, length of the text, part index and count). The
// data, over all parts in order, is the text (the method of a request, the
// status message of an error response) followed by the wire frame
// (EncodeWireHeader(header), then the payload). Every chunk of at least 256
// KiB is a part of its own, sent from its contiguous buffer so that UCX can
// move it zero-copy; the pieces between them are parts handed to UCX as I/O
// vectors (UCP_DATATYPE_IOV) (message_parts.h). Tensors are not copied by
// pstrain on the way out; each chunk's owner is released once UCX reports
// every part's send complete or failed. The receiver keeps each part in its
// own buffer; the frame's payload pieces are those buffers (eager and
// rendezvous receipt: active_messages.h). A client first
// exchanges a hello with the server on each new endpoint, so it knows when
// the connection is up: calls issued meanwhile wait in pstrain, and a call
// is only sent on a connected endpoint (with wait_for_ready, a failed attempt
// is retried with backoff until the deadline without any risk of delivering
// a request twice; client.h). Both ends must be the same byte order.
//
// Transports. UCX chooses per peer, lane by lane, among those both ends have
// and UCX_TLS allows: InfiniBand/RoCE verbs (rc, ud, dc on mlx5 adapters;
// rdmacm connects them) between hosts with such adapters, tcp otherwise, and
// shared memory (posix, sysv for messages; cma for rendezvous) between
// processes of one host in one network namespace.
// Network namespaces: a channel to a peer outside this process's network
// namespace -- an address that is neither loopback nor one of this
// namespace's interfaces': another host, or a container, pod or emulated
// host on this one -- connects from a second UCP context and worker whose
// UCX_TLS leaves shared memory out (made at the first such connection;
// engine.h). UCX 1.13 offers shared memory between network namespaces of
// one kernel (it compares only the host and the IPC namespace), but a
// sleeping receiver is woken through an abstract AF_UNIX socket, which
// exists only in the receiver's network namespace: every wake-up was lost
// and each message waited for the receiver's timed wake-up (1 s), 18
// images/sec between pods where grpc trains at tens of thousands
// (docs/BENCHMARKS.md, "ucx between hosts that share a kernel"). Since
// UCX picks lanes both ends offer, a server's endpoint to such a client has
// no shared memory either. Listeners, the connections they accept and
// channels to peers in this namespace use the first context, shared memory
// included.
// Errors on endpoints: every endpoint uses UCP_ERR_HANDLING_MODE_PEER so
// that a dead peer is reported (the endpoint's error callback: "Connection
// reset by remote peer", "Endpoint timeout", ...) and every send completes;
// UCX 1.13 leaves the shared memory transports out of such endpoints unless
// UCX_MM_ERROR_HANDLING=y (openucx/ucx#8477), which the transport therefore
// sets by default (below); a peer is then still watched through UCX's
// keepalive. (Measured without peer error handling on one host: shared
// memory then adds cma rendezvous, 1.3-1.7x pstrain-bench ps's push+pull
// rate, and a killed peer was still noticed within milliseconds through the
// connection's TCP socket; but a rendezvous send to a dead peer never
// completed, holding its tensors until the transport was destroyed, and UCX
// documents neither that error callback nor a forced close for such
// endpoints. So every endpoint keeps it.)
// `UCX_LOG_LEVEL=info` prints the choice per endpoint ("ep_cfg[3]:
// am(sysv/memory) ka(sysv/memory)" within a host, "am(tcp/eth0)" between
// namespaces or hosts).
//
// Polling: after a message or a queued task the progress thread keeps
// polling for PSTRAIN_UCX_SPIN_US microseconds (default 200) before it
// sleeps, so a burst of messages (a step's pushes, then its pulls) costs no
// sleep and wake-up per message; 0 sleeps at once (least CPU on an idle
// link; measured 2-5x slower on 2 shared cores).
//
// Configuration: every UCX_* environment variable applies (both contexts read
// them with ucp_config_read). The usual ones:
//   UCX_TLS=rc,sm,self or tcp   transports UCX may use (default: all; to
//                               peers outside this network namespace the
//                               same without shared memory)
//   UCX_NET_DEVICES=mlx5_0:1    network devices (default: all)
//   UCX_RNDV_THRESH=64k         size from which rendezvous is used (default
//                               auto: a few KiB to tens of KiB, per transport)
//   UCX_LOG_LEVEL=info          UCX's own diagnostics (default warn)
// The first transport of a process sets these defaults in the environment
// unless they are set already (the user's values win; process_settings.h):
//   UCX_MM_ERROR_HANDLING=y     shared memory between processes of one host
//                               (and one network namespace)
//   UCX_TCP_CM_REUSEADDR=y      a server restarted on its fixed port can bind
//                               it while old connections are in TIME_WAIT
//   UCX_RNDV_SCHEME=get_zcopy   large parts are read by the receiver (RDMA
//                               read; an AM pipeline where no lane can read);
//                               to peers outside this network namespace
//                               put_zcopy, written by the sender (RDMA
//                               write, tcp's zero-copy put)
// Sanitizer builds: UCX's memory hooks crash under AddressSanitizer and
// ThreadSanitizer, and UCX reads their setting once, when its library is
// loaded. Such a build must be started with UCX_MEM_MMAP_HOOK_MODE=none
// UCX_MEM_MALLOC_HOOKS=no in the environment (ctest sets them for the
// transport tests); otherwise Connect and Serve fail with FAILED_PRECONDITION
// saying so, instead of the process crashing.
//
// Errors. A call whose deadline passes completes with DEADLINE_EXCEEDED
// naming method, address and deadline; an answer that arrives later is
// dropped. No server at the address: UNAVAILABLE "ucx: cannot reach <address>:
// <UCX status>" (with wait_for_ready: retried until the deadline). A
// connection that fails later completes every call on it with UNAVAILABLE
// "ucx: connection to <address> lost: <UCX status>", and the next call
// reconnects. A request larger than TransportOptions::max_message_bytes is
// refused on the sender with RESOURCE_EXHAUSTED (as gRPC does); a malformed
// message (short or inconsistent AM header, a frame IncomingFrame::FromWire
// rejects) never reaches the Handler: a request is answered with
// INVALID_ARGUMENT, anything else is logged and dropped.
//
// Inside (headers internal to this directory, one concept each): engine.h
// (the UCX context and worker, the progress thread, and the one class that
// owns them), active_messages.h (the wire side), client.h (calls,
// connecting, reconnection), server.h (listeners, responders), address.h,
// process_settings.h (the UCX_* defaults above, the sanitizer check);
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
inline constexpr uint16_t kVersion = 2;

enum class Kind : uint16_t {
  kHello = 1,     // client -> server on a new endpoint; no data
  kHelloAck = 2,  // server -> client: the endpoint is connected
  kRequest = 3,   // data: method (text_bytes), then the wire frame
  kResponse = 4,  // data: status message (text_bytes), then the wire frame if status_code is 0
};

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
};
static_assert(sizeof(AmHeader) == 32, "AmHeader is part of the wire format");

}  // namespace ucx_wire
}  // namespace pstrain
