// ShmLane: the shared-memory path of one channel between two processes (or
// two roles of one process) on one host.
//
// The client creates a segment of two halves: requests (the client writes,
// the server reads) and responses (the server writes, the client reads), and
// offers it to the server; the server opens it only when both run on the
// same kernel in the same network namespace (SharedMemoryHostIdentity), so
// emulated hosts keep crossing their links. Once the server has it open the
// name is unlinked. A frame whose payload is at least kShmMinPayloadBytes
// then travels as its header plus the descriptor of a block holding the
// payload: one copy into shared memory by the sender, read in place by the
// receiver, instead of a socket's two kernel copies. Frames that are small,
// or find no room, go the usual way.
//
// The segment starts with the lane's own calls (shm_lane_calls.h): a page
// of lane state (the server's pid, whether either end closed the lane, the
// words of lent answers: shm_lends.h) and the two call queues (requests,
// responses); the two halves follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/transport/frame.h"
#include "common/transport/grpc/shm_call_queue.h"
#include "common/transport/grpc/shm_lends.h"
#include "common/transport/grpc/shm_ring.h"
#include "common/transport/grpc/shm_segment.h"

namespace pstrain {

// Frames with less payload than this travel inline (their copy costs less
// than a block's bookkeeping, and control messages stay on the socket).
inline constexpr size_t kShmMinPayloadBytes = 64 * 1024;

// What a client offers: its segment, the size of each half, and where it runs.
// Travels as "<name>|<half bytes>|<host identity>|<pid>".
struct ShmOffer {
  std::string name;
  uint64_t half_bytes = 0;
  std::string host;
  int64_t pid = 0;

  std::string Encode() const;
  // INVALID_ARGUMENT naming what is wrong with `text`.
  static absl::StatusOr<ShmOffer> Parse(std::string_view text);
};

// Whether process `pid` of this pid namespace has exited: there is no such
// process, or it has exited and waits to be reaped (a zombie: its parent, a
// launcher, may take a while to notice). False for this process and pid <= 0.
bool ProcessHasExited(int64_t pid);

class ShmLane : public std::enable_shared_from_this<ShmLane> {
 public:
  // A client's new lane with halves of `half_bytes` (rounded up to blocks).
  static absl::StatusOr<std::shared_ptr<ShmLane>> CreateForClient(size_t half_bytes);
  // The server's end of `offer`: FAILED_PRECONDITION when the client runs on
  // another host (or namespace) or its segment cannot be opened here.
  static absl::StatusOr<std::shared_ptr<ShmLane>> AcceptOffer(const ShmOffer& offer);
  // The server's side: what it lent and was not given back stays lent
  // while the client process lives (ShmLender::Abandon).
  ~ShmLane();

  // The client's offer for this lane.
  ShmOffer offer() const;
  // The client's side: the server has the segment open; its name goes.
  void Unlink() { segment_->Unlink(); }
  // The pid of the client (the server's lanes outlive no client).
  int64_t client_pid() const { return client_pid_; }
  // The pid of the server that accepted the lane (0 before it has); set by
  // AcceptOffer.
  int64_t server_pid() const;
  // Whether the server has closed the lane (it stopped, or dropped the lane).
  bool closed() const;
  // Whether the client has stopped taking answers through the lane (its
  // channel dropped the lane or was destroyed); set by CloseClientSide.
  bool client_closed() const;
  void CloseClientSide();
  // The server's side: no more calls through this lane.
  void Close();

  // The lane's calls: the queue the client writes and the one the server writes.
  ShmCallQueue& requests() { return requests_; }
  ShmCallQueue& responses() { return responses_; }

  // When `frame` carries at least kShmMinPayloadBytes and this side's ring
  // has room: copies its payload into a block, releases its chunks and
  // returns the block's descriptor; otherwise nullopt and `frame` is as it was.
  std::optional<ShmDescriptor> Write(OutgoingFrame& frame);
  // The wire bytes of `frame` (EncodeWireHeader(header), zeros up to the
  // next multiple of 64 bytes, then its payload: aligned for the reader)
  // copied into a block of this side's ring, `frame` unchanged; nullopt when
  // they are fewer than kShmMinPayloadBytes or the ring has no room.
  std::optional<ShmDescriptor> WriteWire(const OutgoingFrame& frame);
  // The frame whose wire bytes the peer's block `descriptor` holds
  // (WriteWire); DATA_LOSS or INVALID_ARGUMENT when the block cannot be one.
  absl::StatusOr<IncomingFrame> ReadWire(const ShmDescriptor& descriptor);
  // Takes back a block this side wrote whose call failed before the peer read it.
  void Withdraw(const ShmDescriptor& descriptor) { own_ring_.Withdraw(descriptor); }
  // The frame the peer sent: `wire` holds its wire header (EncodeWireHeader),
  // kept alive by `wire_keepalive`; the payload is the peer's block
  // `descriptor`, read in place and given back when the frame is gone.
  absl::StatusOr<IncomingFrame> Read(std::vector<IncomingFrame::Piece> wire, std::shared_ptr<const void> wire_keepalive,
                                     const ShmDescriptor& descriptor);

  // Answers lent instead of copied (shm_lends.h). The client's side: maps
  // the server's SharedValues, if it named any, so that the server may lend;
  // false when there are none to read.
  bool ReadServerValues();
  // The client's side: a lent answer's frame (`wire`: its wire header).
  absl::StatusOr<IncomingFrame> ReadLent(std::string wire, const ShmLend& lend);
  // The server's side.
  ShmLender& lender() { return lender_; }

  // Blocks of this side taken back unread.
  int64_t withdrawn() const { return own_ring_.withdrawn(); }

 private:
  ShmLane(std::unique_ptr<SharedSegment> segment, uint64_t half_bytes, bool client, int64_t client_pid);

  struct State;
  State* state() const;
  // Keeps `wire_keepalive` and the peer's block `descriptor` (taken) until
  // the last holder lets go; then the block goes back to the peer.
  std::shared_ptr<const void> HoldUntilRead(std::shared_ptr<const void> wire_keepalive,
                                            const ShmDescriptor& descriptor);

  std::unique_ptr<SharedSegment> segment_;
  const uint64_t half_bytes_;
  const int64_t client_pid_;
  ShmCallQueue requests_;
  ShmCallQueue responses_;
  ShmRing own_ring_;         // the half this side writes
  ShmRingReader peer_ring_;  // the half the peer writes
  ShmLender lender_;         // in the state page; the server's
  ShmBorrower borrower_;     // the client's
};

}  // namespace pstrain
