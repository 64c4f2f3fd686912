#include "common/transport/grpc/shm_lends.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

std::atomic_ref<uint64_t> Ticket(ShmLendWords* words, uint32_t slot) { return std::atomic_ref(words->ticket[slot]); }

// A lent frame's hold: gives the lend back when the frame is gone.
class LentFrame {
 public:
  LentFrame(std::string wire, ShmLendWords* words, const ShmLend& lend, std::shared_ptr<const void> keepalive)
      : wire_(std::move(wire)),
        words_(words),
        slot_(lend.slot),
        ticket_(lend.ticket),
        keepalive_(std::move(keepalive)) {}
  ~LentFrame() {
    uint64_t expected = ticket_;
    Ticket(words_, slot_).compare_exchange_strong(expected, 0, std::memory_order_release, std::memory_order_relaxed);
  }
  LentFrame(const LentFrame&) = delete;
  LentFrame& operator=(const LentFrame&) = delete;
  const std::string& wire() const { return wire_; }

 private:
  const std::string wire_;
  ShmLendWords* const words_;
  const uint32_t slot_;
  const uint64_t ticket_;
  std::shared_ptr<const void> keepalive_;  // the lane: its state page and the mapping of the arena
};

}  // namespace

// ---------------------------------------------------------------- server

void ShmLender::Advertise() {
  SharedValues* arena = SharedValues::Get();
  if (arena == nullptr) return;
  words_->values_fd = arena->fd();
  std::atomic_ref(words_->values_bytes).store(arena->size(), std::memory_order_release);
}

void ShmLender::ReapLocked() {
  for (uint32_t slot = 0; slot < kLendSlots; ++slot) {
    // Acquire: the client's reads of the lent bytes happen before the owners go.
    if (!held_[slot].empty() && Ticket(words_, slot).load(std::memory_order_acquire) == 0) held_[slot].clear();
  }
}

std::optional<ShmLend> ShmLender::Lend(const OutgoingFrame& frame, size_t min_bytes, size_t max_refs) {
  SharedValues* arena = SharedValues::Get();
  if (arena == nullptr || std::atomic_ref(words_->client_reads).load(std::memory_order_acquire) == 0 ||
      frame.payload_bytes() < min_bytes) {
    return std::nullopt;
  }
  ShmLend lend;
  std::vector<std::shared_ptr<const void>> owners;
  for (const ConstChunk& chunk : frame.chunks) {
    if (chunk.size == 0) continue;
    // Only what an owner keeps alive can be lent: the lend holds the owner.
    const std::optional<uint64_t> offset = arena->OffsetOf(chunk.data, chunk.size);
    if (!offset.has_value() || chunk.owner == nullptr || lend.refs.size() == max_refs) return std::nullopt;
    lend.refs.push_back({*offset, chunk.size});
    owners.push_back(chunk.owner);
  }
  absl::MutexLock lock(&mu_);
  ReapLocked();
  for (uint32_t slot = 0; slot < kLendSlots; ++slot) {
    if (!held_[slot].empty() || Ticket(words_, slot).load(std::memory_order_relaxed) != 0) continue;
    held_[slot] = std::move(owners);
    lend.slot = slot;
    lend.ticket = next_ticket_++;
    Ticket(words_, slot).store(lend.ticket, std::memory_order_relaxed);  // published with the record
    return lend;
  }
  return std::nullopt;  // every slot lent: copy this one
}

void ShmLender::TakeBack(const ShmLend& lend) {
  absl::MutexLock lock(&mu_);
  Ticket(words_, lend.slot).store(0, std::memory_order_relaxed);
  held_[lend.slot].clear();
}

void ShmLender::Abandon(bool reader_gone) {
  absl::MutexLock lock(&mu_);
  ReapLocked();
  if (reader_gone) return;
  // Never freed (reachable from here): the arena must not hand these bytes out again.
  static absl::Mutex kept_mu(absl::kConstInit);
  static auto* const kept_for_good = new std::vector<std::shared_ptr<const void>>();
  int64_t kept = 0;
  absl::MutexLock keep(&kept_mu);
  for (auto& owners : held_) {
    if (owners.empty()) continue;
    for (auto& owner : owners) kept_for_good->push_back(std::move(owner));
    owners.clear();
    ++kept;
  }
  LOG_IF(WARNING, kept > 0) << "shared memory: a lane dropped while its client lives still lends " << kept
                            << " answers; their buffers are kept for the life of this process";
}

// ---------------------------------------------------------------- client

bool ShmBorrower::MapServerValues(int64_t server_pid) {
  const uint64_t bytes = std::atomic_ref(words_->values_bytes).load(std::memory_order_acquire);
  if (bytes == 0) return false;
  absl::StatusOr<std::unique_ptr<PeerValues>> values = PeerValues::Open(server_pid, words_->values_fd, bytes);
  if (!values.ok()) {
    LOG_FIRST_N(WARNING, 1) << values.status().message() << "; pulls through this lane are copied";
    return false;
  }
  {
    absl::MutexLock lock(&mu_);
    values_ = *std::move(values);
  }
  std::atomic_ref(words_->client_reads).store(1, std::memory_order_release);
  return true;
}

absl::StatusOr<IncomingFrame> ShmBorrower::Read(std::string wire, const ShmLend& lend,
                                                std::shared_ptr<const void> keepalive) {
  if (lend.slot >= kLendSlots || lend.ticket == 0 || lend.refs.empty()) {
    return absl::DataLossError(absl::StrCat("shared memory: a lend in slot ", lend.slot, " of ", kLendSlots,
                                            " with ticket ", lend.ticket, " and ", lend.refs.size(), " pieces"));
  }
  // Made first, so that the lend goes back whatever happens below.
  auto hold = std::make_shared<LentFrame>(std::move(wire), words_, lend, std::move(keepalive));
  std::vector<IncomingFrame::Piece> pieces = {{hold->wire().data(), hold->wire().size()}};
  absl::MutexLock lock(&mu_);
  if (values_ == nullptr) return absl::DataLossError("shared memory: a lent answer, but no server arena is mapped");
  for (const ShmValueRef& ref : lend.refs) {
    absl::StatusOr<const char*> at = values_->At(ref.offset, ref.bytes);
    if (!at.ok()) return at.status();
    pieces.push_back({*at, ref.bytes});
  }
  return IncomingFrame::FromWire(std::move(pieces), std::move(hold));
}

}  // namespace pstrain
