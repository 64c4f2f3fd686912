// Shared memory under the grpc transport (ShmLane, shm_lane.h): the client's
// lane, attached on first use, and the server's lanes.
//
// A client channel offers a lane with its first frame of at least
// kShmMinPayloadBytes (an attach call the transport serves itself); until the
// server accepts, and whenever it refuses (another host, TLS, no room in
// /dev/shm), frames go through the socket as before. Once attached, every
// call names the lane ("pstrain-shm-lane" metadata) so that the server can
// put a large answer there, and a large request names its block
// ("pstrain-shm-block"); a large answer names its block in the trailing
// metadata. Either end refuses nothing the other sends inline. A server keeps
// a lane until its client process has exited (noticed at the next attach) or
// the server stops.
//
// Once attached, calls that do not wait for the server to come up skip gRPC
// altogether: they go through the lane's own queues (shm_lane_calls.h). A
// lane whose server closed it or went away is dropped at the next call, and
// the next large frame offers a new one.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/frame.h"
#include "common/transport/grpc/shm_lane.h"
#include "common/transport/grpc/shm_lane_calls.h"
#include "common/transport/transport.h"

namespace pstrain {

// Served by the transport itself, beside the handler's methods.
inline constexpr char kShmAttachMethod[] = "/pstrain.Transport/AttachSharedMemory";
inline constexpr char kShmOfferKey[] = "pstrain-shm-offer";

using GrpcMetadata = std::multimap<grpc::string_ref, grpc::string_ref>;

// Bytes of each half of a channel's lane: PSTRAIN_GRPC_SHARED_MEMORY_MB
// (default 256; 0 turns shared memory off).
size_t SharedMemoryHalfBytesFromEnvironment();

// Whether attached lanes carry calls themselves: PSTRAIN_GRPC_LANE_CALLS
// (default 1; 0 sends every call through gRPC, the lane carrying only the
// large payloads, as before lane calls existed: for comparisons).
bool LaneCallsFromEnvironment();

// One client channel's lane. Thread-safe.
class ClientShm {
 public:
  // `half_bytes` 0: never offers a lane.
  explicit ClientShm(size_t half_bytes) : half_bytes_(half_bytes) {}

  // The offer to send (kShmAttachMethod, kShmOfferKey) when a frame of
  // `payload_bytes` should start an attach now; report its outcome to Attached.
  std::optional<std::string> OfferIfDue(size_t payload_bytes);
  // The attach call's outcome: its status and the server's trailing
  // metadata (the lane's id), or why not.
  void Attached(const absl::Status& status, const GrpcMetadata& trailing);
  // Sends the call through the lane's own queues when attached, unless it
  // waits for the server to come up; false (nothing changed) when it must go
  // through gRPC. A lane that no longer serves calls is dropped here.
  bool CallThroughLane(std::string_view method, OutgoingFrame& request, const CallOptions& options,
                       ResponseCallback& done);
  // What one call sent through the lane.
  struct Sent {
    std::shared_ptr<ShmLane> lane;  // null: not attached when the call started
    std::optional<ShmDescriptor> block;
    OutgoingFrame original;  // with a block: the frame as given, to send again
  };
  // Before a call: names the lane in `context` and moves a large payload of
  // `frame` into it (`frame` keeps its header).
  Sent Prepare(OutgoingFrame& frame, grpc::ClientContext& context);
  // After the call: the answer, read from the lane when the server's
  // trailing metadata names a block. Withdraws the request's block when the
  // call failed.
  absl::StatusOr<IncomingFrame> Finish(const absl::Status& call, const grpc::ClientContext& context,
                                       std::vector<IncomingFrame::Piece> wire, std::shared_ptr<const void> keepalive,
                                       const Sent& sent);
  // Whether a call that sent `sent` failed because the server does not know
  // its lane (it restarted): the call goes again inline, after Forget.
  static bool ServerLostLane(const absl::Status& call, const Sent& sent);
  // Whether this channel will never have a lane: shared memory is off, or
  // the server refused the offer (another host, TLS, no room).
  bool WillNotAttach() const;
  // Drops `sent`'s lane (if still this channel's), so the next large frame
  // offers a new one.
  void Forget(const Sent& sent);
  // Takes back the request's block of a call that failed (if it had one).
  static void Withdraw(const Sent& sent);

 private:
  enum class State { kNotOffered, kOffered, kAttached, kRefused };
  // Forgets the lane `caller` serves, if it is still this channel's.
  void Drop(const std::shared_ptr<ShmLaneCaller>& caller);

  const size_t half_bytes_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kNotOffered;
  std::shared_ptr<ShmLane> lane_ ABSL_GUARDED_BY(mu_);
  std::string lane_id_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ShmLaneCaller> caller_ ABSL_GUARDED_BY(mu_);  // while attached
};

// A server's lanes, by id. Thread-safe.
class ServerShm {
 public:
  // `enabled` false: every offer is refused (UNIMPLEMENTED). Calls through a
  // lane go to `handler` (not owned; must outlive CloseLanes).
  ServerShm(bool enabled, Handler* handler) : enabled_(enabled), handler_(handler) {}
  ~ServerShm() { CloseLanes(); }

  // Serves an attach call: puts the new lane's id in `call`'s trailing
  // metadata, or says why the offer is refused.
  absl::Status Attach(grpc::ServerContextBase& call);
  // The lane a call names, if this server has it.
  std::shared_ptr<ShmLane> LaneOf(const GrpcMetadata& client_metadata) const;
  // The request: `wire` alone, or its header with the payload of the block
  // the call names in `lane`; UNAVAILABLE when it names a block of a lane
  // this server does not have (it restarted: the client attaches again).
  static absl::StatusOr<IncomingFrame> ReadRequest(const GrpcMetadata& client_metadata, ShmLane* lane,
                                                   std::vector<IncomingFrame::Piece> wire,
                                                   std::shared_ptr<const void> keepalive);
  // Moves a large payload of `response` into `lane` (when there is one and it
  // has room), naming the block in `call`'s trailing metadata.
  static void PutResponse(ShmLane* lane, OutgoingFrame& response, grpc::ServerContextBase& call);
  // Closes every lane (their clients fail the calls still waiting and go
  // back to the socket); returns once no lane call runs in the handler.
  void CloseLanes();

 private:
  struct ServedLane {
    std::shared_ptr<ShmLane> lane;
    std::unique_ptr<ShmLaneCallee> callee;  // serves the lane's own calls
  };
  void ForgetDeadClientsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool enabled_;
  Handler* const handler_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, ServedLane> lanes_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace pstrain
