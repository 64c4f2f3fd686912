#include "common/transport/grpc/shm_lane.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace pstrain {
namespace {

// Unread blocks are taken back after this long (a descriptor lost with a
// cancelled call); far longer than any answer takes to arrive.
constexpr absl::Duration kWithdrawAfter = absl::Seconds(60);
// The largest half a peer may offer.
constexpr uint64_t kMaxHalfBytes = uint64_t{1} << 36;

uint64_t RoundToBlocks(uint64_t n) { return ShmRoundUp(n, kShmBlockAlignment); }
// Where WriteWire puts a frame's payload in its block: after the wire
// header, at the next multiple of this (floats, and whole cache lines).
constexpr uint64_t kShmPayloadAlignment = 64;
// The smallest half: its state table and one block.
constexpr uint64_t kMinHalfBytes = 2 * kShmBlockAlignment;

// The segment's calls area: a page of lane state, then the requests and the
// responses queues; the halves follow it.
constexpr uint64_t kStateBytes = kShmBlockAlignment;
constexpr uint64_t kQueueBytes = uint64_t{1} << 20;
constexpr uint64_t kCallsBytes = kStateBytes + 2 * kQueueBytes;

// Frees a read block when the last holder of its frame lets go.
class ReadBlock {
 public:
  ReadBlock(std::shared_ptr<const void> wire, std::shared_ptr<ShmRingReader> ring, const ShmDescriptor& descriptor)
      : wire_(std::move(wire)), ring_(std::move(ring)), descriptor_(descriptor) {}
  ~ReadBlock() { ring_->Free(descriptor_); }
  ReadBlock(const ReadBlock&) = delete;
  ReadBlock& operator=(const ReadBlock&) = delete;

 private:
  std::shared_ptr<const void> wire_;
  std::shared_ptr<ShmRingReader> ring_;  // aliases the lane: keeps the mapping
  ShmDescriptor descriptor_;
};

}  // namespace

bool ProcessHasExited(int64_t pid) {
  if (pid <= 0 || pid == getpid()) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');  // the state follows the command name, which may hold anything
  if (name_end == std::string::npos || name_end + 2 >= text.size()) return false;
  const char state = text[name_end + 2];
  return state == 'Z' || state == 'X';
}

std::string ShmOffer::Encode() const { return absl::StrCat(name, "|", half_bytes, "|", host, "|", pid); }

absl::StatusOr<ShmOffer> ShmOffer::Parse(std::string_view text) {
  const absl::string_view t(text.data(), text.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(t, '|');
  ShmOffer offer;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &offer.half_bytes) || !absl::SimpleAtoi(parts[3], &offer.pid)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory offer '", t.substr(0, 128), "' is not <name>|<half bytes>|<host>|<pid>"));
  }
  offer.name = std::string(parts[0]);
  offer.host = std::string(parts[2]);
  if (offer.half_bytes < kMinHalfBytes || offer.half_bytes % kShmBlockAlignment != 0 ||
      offer.half_bytes > kMaxHalfBytes) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory offer: half of ", offer.half_bytes,
                                                   " bytes (a multiple of ", kShmBlockAlignment, " from ",
                                                   kMinHalfBytes, " up to ", kMaxHalfBytes, ")"));
  }
  return offer;
}

// The lane's state page (zero until the server accepts).
struct ShmLane::State {
  int64_t server_pid;
  uint32_t closed;
  uint32_t client_closed;
  ShmLendWords lends;
};

ShmLane::ShmLane(std::unique_ptr<SharedSegment> segment, uint64_t half_bytes, bool client, int64_t client_pid)
    : segment_(std::move(segment)),
      half_bytes_(half_bytes),
      client_pid_(client_pid),
      requests_(segment_->data() + kStateBytes, kQueueBytes),
      responses_(segment_->data() + kStateBytes + kQueueBytes, kQueueBytes),
      own_ring_(segment_.get(), kCallsBytes + (client ? 0 : half_bytes), half_bytes, kWithdrawAfter),
      peer_ring_(segment_->data() + kCallsBytes + (client ? half_bytes : 0), half_bytes),
      lender_(&state()->lends),
      borrower_(&state()->lends) {}

ShmLane::~ShmLane() { lender_.Abandon(ProcessHasExited(client_pid_) || client_pid_ == 0); }

ShmLane::State* ShmLane::state() const {
  static_assert(sizeof(State) <= kStateBytes);
  return reinterpret_cast<State*>(segment_->data());
}

int64_t ShmLane::server_pid() const {
  return std::atomic_ref<int64_t>(state()->server_pid).load(std::memory_order_acquire);
}

bool ShmLane::closed() const { return std::atomic_ref<uint32_t>(state()->closed).load(std::memory_order_acquire) != 0; }

void ShmLane::Close() { std::atomic_ref<uint32_t>(state()->closed).store(1, std::memory_order_release); }

bool ShmLane::client_closed() const {
  return std::atomic_ref<uint32_t>(state()->client_closed).load(std::memory_order_acquire) != 0;
}

void ShmLane::CloseClientSide() {
  std::atomic_ref<uint32_t>(state()->client_closed).store(1, std::memory_order_release);
}

absl::StatusOr<std::shared_ptr<ShmLane>> ShmLane::CreateForClient(size_t half_bytes) {
  const uint64_t half = RoundToBlocks(std::max<uint64_t>(half_bytes, kMinHalfBytes));
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SharedSegment> segment, SharedSegment::Create(kCallsBytes + 2 * half));
  PSTRAIN_RETURN_IF_ERROR(segment->Commit(0, kCallsBytes));
  return std::shared_ptr<ShmLane>(new ShmLane(std::move(segment), half, /*client=*/true, getpid()));
}

absl::StatusOr<std::shared_ptr<ShmLane>> ShmLane::AcceptOffer(const ShmOffer& offer) {
  const std::string here = SharedMemoryHostIdentity();
  if (here.empty() || offer.host != here) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory: the client runs on another host or network namespace (", offer.host, "; here ",
                     here.empty() ? "unknown" : here, ")"));
  }
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<SharedSegment> segment,
                           SharedSegment::Open(offer.name, kCallsBytes + 2 * offer.half_bytes));
  std::shared_ptr<ShmLane> lane(new ShmLane(std::move(segment), offer.half_bytes, /*client=*/false, offer.pid));
  lane->lender_.Advertise();  // before the pid: the client reads the arena once it sees the server
  std::atomic_ref<int64_t>(lane->state()->server_pid).store(getpid(), std::memory_order_release);
  return lane;
}

ShmOffer ShmLane::offer() const {
  return ShmOffer{segment_->name(), half_bytes_, SharedMemoryHostIdentity(), client_pid_};
}

std::optional<ShmDescriptor> ShmLane::Write(OutgoingFrame& frame) {
  const size_t bytes = frame.payload_bytes();
  if (bytes < kShmMinPayloadBytes) return std::nullopt;
  std::optional<ShmRing::Block> block = own_ring_.Allocate(bytes);
  if (!block.has_value()) return std::nullopt;
  char* out = block->payload;
  for (const ConstChunk& chunk : frame.chunks) {
    if (chunk.size > 0) std::memcpy(out, chunk.data, chunk.size);
    out += chunk.size;
  }
  frame.chunks.clear();
  return block->descriptor;
}

std::optional<ShmDescriptor> ShmLane::WriteWire(const OutgoingFrame& frame) {
  const std::string wire_header = EncodeWireHeader(frame.header);
  const size_t payload_at = ShmRoundUp(wire_header.size(), kShmPayloadAlignment);
  if (wire_header.size() + frame.payload_bytes() < kShmMinPayloadBytes) return std::nullopt;
  std::optional<ShmRing::Block> block = own_ring_.Allocate(payload_at + frame.payload_bytes());
  if (!block.has_value()) return std::nullopt;
  std::memcpy(block->payload, wire_header.data(), wire_header.size());
  std::memset(block->payload + wire_header.size(), 0, payload_at - wire_header.size());
  char* out = block->payload + payload_at;
  for (const ConstChunk& chunk : frame.chunks) {
    if (chunk.size > 0) std::memcpy(out, chunk.data, chunk.size);
    out += chunk.size;
  }
  return block->descriptor;
}

absl::StatusOr<IncomingFrame> ShmLane::ReadWire(const ShmDescriptor& descriptor) {
  PSTRAIN_ASSIGN_OR_RETURN(const char* block, peer_ring_.Take(descriptor));
  std::shared_ptr<const void> hold = HoldUntilRead(nullptr, descriptor);
  PSTRAIN_ASSIGN_OR_RETURN(IncomingFrame wire, IncomingFrame::FromWire({{block, descriptor.bytes}}, hold));
  const size_t payload_at = ShmRoundUp(descriptor.bytes - wire.payload_bytes(), kShmPayloadAlignment);
  if (payload_at > descriptor.bytes) {
    return absl::DataLossError(absl::StrCat("shared memory: a block of ", descriptor.bytes,
                                            " bytes ends inside its frame's padded header of ", payload_at, " bytes"));
  }
  return IncomingFrame(wire.header(), {{block + payload_at, descriptor.bytes - payload_at}}, std::move(hold));
}

absl::StatusOr<IncomingFrame> ShmLane::Read(std::vector<IncomingFrame::Piece> wire,
                                            std::shared_ptr<const void> wire_keepalive,
                                            const ShmDescriptor& descriptor) {
  PSTRAIN_ASSIGN_OR_RETURN(const char* payload, peer_ring_.Take(descriptor));
  std::shared_ptr<const void> hold = HoldUntilRead(std::move(wire_keepalive), descriptor);
  if (descriptor.bytes > 0) wire.push_back({payload, descriptor.bytes});
  return IncomingFrame::FromWire(std::move(wire), std::move(hold));
}

bool ShmLane::ReadServerValues() {
  const int64_t server = server_pid();
  return server > 0 && borrower_.MapServerValues(server);
}

absl::StatusOr<IncomingFrame> ShmLane::ReadLent(std::string wire, const ShmLend& lend) {
  return borrower_.Read(std::move(wire), lend, shared_from_this());
}

std::shared_ptr<const void> ShmLane::HoldUntilRead(std::shared_ptr<const void> wire_keepalive,
                                                   const ShmDescriptor& descriptor) {
  return std::make_shared<ReadBlock>(std::move(wire_keepalive),
                                     std::shared_ptr<ShmRingReader>(shared_from_this(), &peer_ring_), descriptor);
}

}  // namespace pstrain
