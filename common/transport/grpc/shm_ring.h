// ShmRing: blocks of one region of a shared segment, written by one process
// and read by another; and the descriptor that names a block between them.
//
// The writer allocates a block, fills it and sends its descriptor (over the
// gRPC call it belongs to); the reader takes the block, reads it in place and
// frees it. Ownership moves by compare-and-swap on the block's state word
// (live -> taken -> free), so a block can also be withdrawn safely by its
// writer (live -> free) when the reader never took it: a call that failed
// before its peer saw it, or a descriptor lost with a cancelled call (after
// `withdraw_after`). The state words live in a table at the start of the
// region, one per place a block can start, never among payload bytes, and
// carry the block's sequence number: a late reader finds its block withdrawn
// and fails the call; it never reads, nor writes, bytes that were reused.
//
// Blocks are taken in address order around the region (going back to its
// start early once the ring reaches past a few times the bytes in flight,
// so it commits little more memory than its traffic needs), and space comes
// back as the oldest live block is freed; when there is no room Allocate
// says so and the caller sends its bytes another way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/grpc/shm_segment.h"

namespace pstrain {

// Names one block of a region: where it starts among the blocks, its payload
// bytes, and the sequence number that makes a stale descriptor fail instead
// of reading a later block at the same place. Travels as
// "<offset>,<bytes>,<seq>".
struct ShmDescriptor {
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t seq = 0;

  std::string Encode() const;
  // INVALID_ARGUMENT naming what is wrong with `text`.
  static absl::StatusOr<ShmDescriptor> Parse(std::string_view text);
};

// Blocks start at multiples of this (regions are multiples of it too).
inline constexpr size_t kShmBlockAlignment = 4096;

// `n` rounded up to a multiple of `to` (> 0).
inline constexpr uint64_t ShmRoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// A region of `region_bytes` (a multiple of kShmBlockAlignment): the state
// table first, then the blocks. Writer and reader compute the same.
struct ShmRegionLayout {
  explicit ShmRegionLayout(uint64_t region_bytes);
  uint64_t table_bytes = 0;  // 16 bytes per block start, rounded up to kShmBlockAlignment
  uint64_t area_bytes = 0;   // bytes for blocks; descriptors' offsets count from here
};

// The writer's side. Thread-safe.
class ShmRing {
 public:
  // The region [offset, offset + bytes) of `segment` (not owned; both
  // multiples of kShmBlockAlignment). Commits the region's state table; when
  // that fails, Allocate refuses everything.
  ShmRing(SharedSegment* segment, size_t offset, size_t bytes, absl::Duration withdraw_after);

  struct Block {
    ShmDescriptor descriptor;
    char* payload;  // descriptor.bytes writable bytes
  };
  // A live block for `bytes` of payload; nullopt when the ring has no room
  // now or its memory cannot be committed.
  std::optional<Block> Allocate(size_t bytes);
  // Takes back a block its reader has not taken; false when the reader has.
  bool Withdraw(const ShmDescriptor& descriptor);

  // Blocks taken back without a reader (Withdraw, or unread past withdraw_after).
  int64_t withdrawn() const;

 private:
  struct Live {
    uint64_t offset;
    uint64_t end;
    uint64_t seq;
    absl::Time allocated;
  };
  void ReclaimLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<uint64_t> PlaceLocked(uint64_t total) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CommitLocked(uint64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SharedSegment* const segment_;
  const ShmRegionLayout layout_;
  char* const table_;
  char* const area_;
  const size_t area_offset_;  // in the segment
  const uint64_t size_;       // layout_.area_bytes
  const absl::Duration withdraw_after_;
  mutable absl::Mutex mu_;
  std::deque<Live> live_ ABSL_GUARDED_BY(mu_);         // allocation order = address order around the ring
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;             // where the next block goes
  uint64_t live_bytes_ ABSL_GUARDED_BY(mu_) = 0;       // of the blocks in live_
  uint64_t peak_live_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the most ever
  uint64_t committed_ ABSL_GUARDED_BY(mu_) = 0;        // bytes of the blocks backed by memory
  bool commit_failed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t withdrawn_ ABSL_GUARDED_BY(mu_) = 0;
};

// The reader's side of one region (any thread).
class ShmRingReader {
 public:
  // The region at `region` of `bytes` (a multiple of kShmBlockAlignment).
  ShmRingReader(char* region, size_t bytes);
  // The payload of the block `descriptor` names, now the reader's:
  // INVALID_ARGUMENT when the descriptor does not name a block of this
  // region, FAILED_PRECONDITION when the writer withdrew it.
  absl::StatusOr<const char*> Take(const ShmDescriptor& descriptor);
  // Gives a block this reader took back to its writer (nothing else: a
  // second Free, or one of a descriptor never taken, changes nothing).
  void Free(const ShmDescriptor& descriptor);

 private:
  const ShmRegionLayout layout_;
  char* const table_;
  char* const area_;
};

}  // namespace pstrain
