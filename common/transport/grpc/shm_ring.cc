#include "common/transport/grpc/shm_ring.h"

#include <atomic>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// A block's state word: (seq << 2) | tag.
constexpr uint64_t kFree = 0;
constexpr uint64_t kLive = 1;
constexpr uint64_t kTaken = 2;
constexpr uint64_t kTagMask = 3;

// The table's entry for one place a block can start.
struct Slot {
  uint64_t state;
  uint64_t bytes;  // the live block's payload bytes
};
static_assert(sizeof(Slot) == 16);
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free, "the state word is shared between processes");

Slot* SlotOf(char* table, uint64_t offset) { return reinterpret_cast<Slot*>(table) + offset / kShmBlockAlignment; }
std::atomic_ref<uint64_t> StateOf(char* table, uint64_t offset) {
  return std::atomic_ref<uint64_t>(SlotOf(table, offset)->state);
}

constexpr uint64_t kCommitStep = 1 << 20;  // memory is committed a MiB at a time
constexpr uint64_t kMinFootprint = 16 << 20;

}  // namespace

ShmRegionLayout::ShmRegionLayout(uint64_t region_bytes) {
  const uint64_t places = region_bytes / kShmBlockAlignment;
  table_bytes = std::min(region_bytes, ShmRoundUp(places * sizeof(Slot), kShmBlockAlignment));
  area_bytes = (region_bytes - table_bytes) / kShmBlockAlignment * kShmBlockAlignment;
}

std::string ShmDescriptor::Encode() const { return absl::StrCat(offset, ",", bytes, ",", seq); }

absl::StatusOr<ShmDescriptor> ShmDescriptor::Parse(std::string_view text) {
  const absl::string_view t(text.data(), text.size());
  const std::vector<absl::string_view> parts = absl::StrSplit(t, ',');
  ShmDescriptor d;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &d.offset) || !absl::SimpleAtoi(parts[1], &d.bytes) ||
      !absl::SimpleAtoi(parts[2], &d.seq)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory descriptor '", t.substr(0, 64), "' is not <offset>,<bytes>,<seq>"));
  }
  if (d.seq == 0 || d.seq >= (uint64_t{1} << 62)) {
    return absl::InvalidArgumentError(absl::StrCat("shared memory descriptor: sequence ", d.seq, " out of range"));
  }
  return d;
}

ShmRing::ShmRing(SharedSegment* segment, size_t offset, size_t bytes, absl::Duration withdraw_after)
    : segment_(segment),
      layout_(bytes),
      table_(segment->data() + offset),
      area_(table_ + layout_.table_bytes),
      area_offset_(offset + layout_.table_bytes),
      size_(layout_.area_bytes),
      withdraw_after_(withdraw_after) {
  CHECK_EQ(offset % kShmBlockAlignment, 0u);
  CHECK_EQ(bytes % kShmBlockAlignment, 0u);
  CHECK_LE(offset + bytes, segment->size());
  absl::Status table = segment->Commit(offset, layout_.table_bytes);
  if (!table.ok()) {
    LOG(WARNING) << table << "; larger messages on this channel go through the socket instead";
    absl::MutexLock lock(&mu_);
    commit_failed_ = true;
  }
}

std::optional<ShmRing::Block> ShmRing::Allocate(size_t bytes) {
  if (bytes > size_) return std::nullopt;
  const uint64_t total = std::max<uint64_t>(ShmRoundUp(bytes, kShmBlockAlignment), kShmBlockAlignment);
  if (total > size_) return std::nullopt;
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  ReclaimLocked(now);
  const std::optional<uint64_t> at = PlaceLocked(total);
  if (!at.has_value() || !CommitLocked(*at + total)) return std::nullopt;
  const uint64_t seq = next_seq_++;
  SlotOf(table_, *at)->bytes = bytes;
  StateOf(table_, *at).store((seq << 2) | kLive, std::memory_order_release);
  live_.push_back({*at, *at + total, seq, now});
  live_bytes_ += total;
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  head_ = *at + total;
  return Block{{*at, bytes, seq}, area_ + *at};
}

bool ShmRing::Withdraw(const ShmDescriptor& d) {
  if (d.offset % kShmBlockAlignment != 0 || d.offset >= size_) return false;
  uint64_t expected = (d.seq << 2) | kLive;
  if (!StateOf(table_, d.offset).compare_exchange_strong(expected, kFree, std::memory_order_acq_rel)) return false;
  absl::MutexLock lock(&mu_);
  ++withdrawn_;
  return true;
}

int64_t ShmRing::withdrawn() const {
  absl::MutexLock lock(&mu_);
  return withdrawn_;
}

// Frees the oldest blocks whose readers are done, and withdraws the oldest
// ones still unread after withdraw_after.
void ShmRing::ReclaimLocked(absl::Time now) {
  while (!live_.empty()) {
    const Live& oldest = live_.front();
    uint64_t state = StateOf(table_, oldest.offset).load(std::memory_order_acquire);
    const bool stale = now - oldest.allocated > withdraw_after_;
    if ((state & kTagMask) == kLive && stale &&
        StateOf(table_, oldest.offset).compare_exchange_strong(state, kFree, std::memory_order_acq_rel)) {
      ++withdrawn_;
      state = kFree;
    }
    if ((state & kTagMask) != kFree) break;
    live_bytes_ -= oldest.end - oldest.offset;
    live_.pop_front();
  }
  if (live_.empty()) head_ = 0;
}

// Where a block of `total` bytes fits: after the newest block, or from the
// start of the region up to the oldest one. The ring goes back to the start
// early, once it reaches past a footprint of four times the most bytes ever
// in flight (at least 16 MiB), so the memory it commits stays near what its
// traffic needs while leaving room to run ahead of its reader.
std::optional<uint64_t> ShmRing::PlaceLocked(uint64_t total) const {
  if (live_.empty()) return uint64_t{0};
  const uint64_t tail = live_.front().offset;
  if (head_ > tail) {
    const uint64_t footprint = std::max(4 * peak_live_bytes_, std::min<uint64_t>(size_, kMinFootprint));
    if (head_ + total > footprint && tail >= total) return uint64_t{0};
    if (size_ - head_ >= total) return head_;
    if (tail >= total) return uint64_t{0};
    return std::nullopt;
  }
  if (head_ < tail && tail - head_ >= total) return head_;
  return std::nullopt;  // head_ == tail: full
}

bool ShmRing::CommitLocked(uint64_t end) {
  if (end <= committed_) return true;
  if (commit_failed_) return false;
  const uint64_t to = std::min(size_, ShmRoundUp(end, kCommitStep));
  absl::Status status = segment_->Commit(area_offset_ + committed_, to - committed_);
  if (!status.ok()) {
    commit_failed_ = true;
    LOG(WARNING) << status << "; larger messages on this channel go through the socket instead";
    return false;
  }
  committed_ = to;
  return true;
}

ShmRingReader::ShmRingReader(char* region, size_t bytes)
    : layout_(bytes), table_(region), area_(region + layout_.table_bytes) {}

absl::StatusOr<const char*> ShmRingReader::Take(const ShmDescriptor& d) {
  const uint64_t size = layout_.area_bytes;
  if (d.offset % kShmBlockAlignment != 0 || d.offset >= size || d.bytes > size - d.offset) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory descriptor ", d.Encode(), " does not name a block of a ", size, "-byte region"));
  }
  uint64_t expected = (d.seq << 2) | kLive;
  if (!StateOf(table_, d.offset).compare_exchange_strong(expected, (d.seq << 2) | kTaken, std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory block ", d.Encode(), " was withdrawn by its writer before it was read"));
  }
  const uint64_t holds = SlotOf(table_, d.offset)->bytes;
  if (holds != d.bytes) {
    Free(d);
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory descriptor ", d.Encode(), " says ", d.bytes, " bytes; its block holds ", holds));
  }
  return area_ + d.offset;
}

void ShmRingReader::Free(const ShmDescriptor& d) {
  if (d.offset % kShmBlockAlignment != 0 || d.offset >= layout_.area_bytes) return;
  uint64_t taken = (d.seq << 2) | kTaken;  // only the block this reader took
  StateOf(table_, d.offset).compare_exchange_strong(taken, kFree, std::memory_order_release, std::memory_order_relaxed);
}

}  // namespace pstrain
