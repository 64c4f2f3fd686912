// TcpLaneClient: a grpc channel's TCP lane (tcp_lane_wire.h), the path of
// its large calls to a server on another host.
//
// gRPC moves a large message through HTTP/2 frames, its own buffers and
// several threads; between two hosts that costs about as much CPU per byte
// as the kernel's copies themselves (docs/BENCHMARKS.md). A lane is a plain
// TCP connection of the channel's own: a request is written straight from
// its chunks, and an answer is read straight into the memory the call names
// (CallOptions::receive_into), as a program moving a model over sockets
// would.
//
// Which calls: those that do not wait for the server to come up and carry a
// payload of at least kTcpLaneMinPayloadBytes or name memory for their
// answer (pushes and pulls). Everything else stays on gRPC, so control calls
// (heartbeats, joins, membership, checkpoints) never queue behind bulk bytes.
//
// Attaching: the first such call, once the channel's shared-memory lane is
// out of the question (another host, or shared memory off), has the channel
// ask the server for its lane (an attach call through gRPC, which carries
// the token); the client connects in the background, and calls go through
// gRPC until it is up. A server without lanes (TLS, PSTRAIN_GRPC_TCP_LANE=0)
// refuses, and the channel stays on gRPC. A lane that breaks fails the calls
// in flight on it with UNAVAILABLE, as a lost gRPC connection would, and
// the next large call attaches again (at most once a second).
//
// Deadlines: a call past its deadline completes with DEADLINE_EXCEEDED; a
// late answer is read and dropped. A call whose answer is arriving in its
// memory completes once the chunk in flight is in (the memory must not be
// written after the call completed), and the connection is closed when that
// takes more than kTcpLaneInPlaceGrace.
//
// Thread-safe. Callbacks run on the lane's own thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/frame.h"
#include "common/transport/grpc/tcp_lane_wire.h"
#include "common/transport/transport.h"

namespace pstrain {

inline constexpr size_t kTcpLaneMinPayloadBytes = 64 * 1024;
inline constexpr absl::Duration kTcpLaneInPlaceGrace = absl::Seconds(5);
// Served by the grpc transport itself; the answer's trailing metadata
// carries the offer under kTcpLaneOfferKey.
inline constexpr char kTcpLaneAttachMethod[] = "/pstrain.Transport/AttachTcpLane";
inline constexpr char kTcpLaneOfferKey[] = "pstrain-tcp-lane";

// Whether grpc channels and servers use TCP lanes: PSTRAIN_GRPC_TCP_LANE
// (default 1; 0 keeps every call on gRPC: for comparisons).
bool TcpLanesFromEnvironment();

// Calls this process has sent through TCP lanes so far (diagnostics, tests).
int64_t TcpLaneCallsSent();

class TcpLaneClient {
 public:
  // `server_address`: the channel's ("host:port"); the lane connects to its
  // host. `enabled` false: never attaches. Payloads of answers over
  // `max_payload_bytes` break the lane as malformed.
  TcpLaneClient(std::string server_address, bool enabled, uint64_t max_payload_bytes);
  // Breaks the lane (calls in flight on it fail with UNAVAILABLE) and waits
  // for its thread.
  ~TcpLaneClient();
  TcpLaneClient(const TcpLaneClient&) = delete;
  TcpLaneClient& operator=(const TcpLaneClient&) = delete;

  // Whether a call of `request` with `options` would go through a lane.
  static bool Suits(const OutgoingFrame& request, const CallOptions& options);
  // Whether the channel should make the attach call now, for a call that
  // Suits; if so, report its outcome to Attached.
  bool AttachDue();
  // The attach call's outcome: the server's trailing metadata value under
  // kTcpLaneOfferKey (empty when absent), or why not. On success connects in
  // the background.
  void Attached(const absl::Status& status, std::string_view offer);
  // Sends the call through the lane when it is connected and the call
  // Suits; false (nothing changed) otherwise.
  bool Call(std::string_view method, OutgoingFrame& request, const CallOptions& options, ResponseCallback& done);
  // Whether the lane is connected (for tests and diagnostics).
  bool connected() const;

 private:
  class Lane;                   // the lane's state and thread, shared with its connection
  class Connection;             // one connected socket and its calls in flight
  std::shared_ptr<Lane> lane_;  // null when not enabled
};

}  // namespace pstrain
