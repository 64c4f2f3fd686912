// Fuzz target: the texts a peer sends about shared memory
// (common/transport/grpc/shm_ring.h, shm_lane.h): a block's descriptor and
// a client's offer, and the reader's Take of the block a descriptor names.
//
// Feeds: the whole input as text to ShmDescriptor::Parse and to
// ShmOffer::Parse. A parsed descriptor then goes to ShmRingReader::Take
// over a fresh heap copy (page-aligned, four pages, between two guard
// pages) of a region that holds one live block (5000 bytes at offset 0 of
// the area, seq 1, written once by a ShmRing into a small shared segment),
// so a read or write past the region is reported by ASan (the guards are
// poisoned) or, for a write, by the check that the copy is unchanged; a
// taken payload is read through and freed. The payload imitates a live state word and byte count at each of
// its 4096-byte places, so a descriptor naming a place inside it finds a
// lookalike there, and must not be fooled: state lives in the region's
// table. Descriptors whose offset is not a place of the area go to Free too.
// Asserts: errors are INVALID_ARGUMENT with a short message; a parsed
// descriptor or offer is within its documented ranges and encodes to a text
// that parses to the same fields. Take fails INVALID_ARGUMENT or
// FAILED_PRECONDITION, writing nothing unless it named the live block (and
// then only the live block's table slot), or succeeds only for the live
// block's own descriptor, handing out its pattern from area + offset; a
// taken block cannot be taken again, nor once freed; the payload never
// changes. A Free of an offset outside the area writes nothing.
// Seeds: tests/fuzz/corpus/shm_descriptor/ (the live block's descriptor;
// stale, misaligned, inside-the-payload, out-of-range and wrong-size ones;
// offers; malformed texts).
#include <sanitizer/asan_interface.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/transport/grpc/shm_lane.h"
#include "common/transport/grpc/shm_ring.h"
#include "common/transport/grpc/shm_segment.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

constexpr size_t kRegionBytes = 4 * kShmBlockAlignment;
constexpr size_t kLiveBytes = 5000;  // two places of the area: 4096 lies inside the payload
constexpr size_t kMaxMessage = 512;

// The live block's payload: a pattern, except that each 4096-byte place of
// it starts with what a table slot of a live block of seq 1 holds (the state
// word (1 << 2) | 1, then a byte count).
char PatternByte(size_t i) {
  if (i % kShmBlockAlignment < 16) {
    const uint64_t lookalike[2] = {(uint64_t{1} << 2) | 1, kLiveBytes - i};
    char word[16];
    std::memcpy(word, lookalike, sizeof(word));
    return word[i % kShmBlockAlignment];
  }
  return static_cast<char>((i * 131 + 7) & 0xff);
}

// Each input's copy of the region sits between two guard pages, so a write
// just outside it shows without a sanitizer too.
constexpr size_t kGuardBytes = kShmBlockAlignment;
constexpr char kGuardByte = static_cast<char>(0xa5);
// Table bytes past the slots of the area's places (no block starts there, so
// a correct reader never touches them) hold this instead of zeros, so a
// stray Free's store of the free state word shows.
constexpr char kUnusedSlotByte = static_cast<char>(0x5a);

struct LiveRegion {
  ShmDescriptor live;
  ShmRegionLayout layout{kRegionBytes};
  std::string bytes;  // guard, the region as the writer left it (unused slots marked), guard
};

const LiveRegion& Snapshot() {
  static const LiveRegion* region = [] {
    absl::StatusOr<std::unique_ptr<SharedSegment>> segment = SharedSegment::Create(kRegionBytes);
    FUZZ_CHECK(segment.ok(), segment.status().ToString());
    (*segment)->Unlink();
    ShmRing ring(segment->get(), 0, kRegionBytes, absl::InfiniteDuration());
    std::optional<ShmRing::Block> block = ring.Allocate(kLiveBytes);
    FUZZ_CHECK(block.has_value(), "a ", kRegionBytes, "-byte ring refused ", kLiveBytes, " bytes");
    FUZZ_CHECK(block->descriptor.offset == 0 && block->descriptor.seq == 1, block->descriptor.Encode());
    const ShmRegionLayout layout(kRegionBytes);
    FUZZ_CHECK(block->payload == (*segment)->data() + layout.table_bytes, "the payload is not at the area's start");
    FUZZ_CHECK(layout.area_bytes >= 2 * kShmBlockAlignment, "an area of ", layout.area_bytes, " bytes");
    for (size_t i = 0; i < kLiveBytes; ++i) block->payload[i] = PatternByte(i);
    std::string bytes(kGuardBytes, kGuardByte);
    bytes.append((*segment)->data(), kRegionBytes);
    bytes.append(kGuardBytes, kGuardByte);
    const size_t unused = layout.area_bytes / kShmBlockAlignment * 16;
    std::memset(bytes.data() + kGuardBytes + unused, kUnusedSlotByte, layout.table_bytes - unused);
    return new LiveRegion{block->descriptor, layout, std::move(bytes)};
  }();
  return *region;
}

bool Same(const ShmDescriptor& a, const ShmDescriptor& b) {
  return a.offset == b.offset && a.bytes == b.bytes && a.seq == b.seq;
}

void CheckRefusal(const absl::Status& status, absl::string_view what) {
  CheckErrorExplains(status, what);
  FUZZ_CHECK(absl::IsInvalidArgument(status), what, ": ", status.ToString());
  FUZZ_CHECK(status.message().size() <= kMaxMessage, what, ": a message of ", status.message().size(), " bytes");
}

void CheckDescriptor(const ShmDescriptor& d) {
  FUZZ_CHECK(d.seq >= 1 && d.seq < (uint64_t{1} << 62), "parsed sequence ", d.seq);
  absl::StatusOr<ShmDescriptor> again = ShmDescriptor::Parse(d.Encode());
  FUZZ_CHECK(again.ok() && Same(*again, d), d.Encode(), " does not parse back: ", again.status().ToString());
}

void CheckOffer(const ShmOffer& offer) {
  FUZZ_CHECK(offer.half_bytes >= 2 * kShmBlockAlignment && offer.half_bytes % kShmBlockAlignment == 0 &&
                 offer.half_bytes <= (uint64_t{1} << 36),
             "parsed half of ", offer.half_bytes, " bytes");
  absl::StatusOr<ShmOffer> again = ShmOffer::Parse(offer.Encode());
  FUZZ_CHECK(again.ok(), offer.Encode(), " does not parse back: ", again.status().ToString());
  FUZZ_CHECK(again->name == offer.name && again->half_bytes == offer.half_bytes && again->host == offer.host &&
                 again->pid == offer.pid,
             offer.Encode(), " parses back to other fields");
}

// A fresh heap copy of the snapshot: guard, region, guard. Under ASan the
// guards are poisoned (a read or write of them is reported); without it a
// write to them shows in Unchanged.
class RegionCopy {
 public:
  explicit RegionCopy(const LiveRegion& snapshot)
      : snapshot_(snapshot),
        size_(snapshot.bytes.size()),
        copy_(static_cast<char*>(std::aligned_alloc(kShmBlockAlignment, size_))) {
    FUZZ_CHECK(copy_ != nullptr, "no memory for a ", size_, "-byte copy");
    std::memcpy(copy_, snapshot.bytes.data(), size_);
    Poison();
  }
  ~RegionCopy() {
    Unpoison();
    std::free(copy_);
  }
  RegionCopy(const RegionCopy&) = delete;
  RegionCopy& operator=(const RegionCopy&) = delete;

  char* region() const { return copy_ + kGuardBytes; }
  // True when the copy, guards included, equals the snapshot, outside the
  // live block's table slot when `but_live_slot`.
  bool Unchanged(bool but_live_slot) const {
    Unpoison();
    const char* want = snapshot_.bytes.data();
    const size_t slot = kGuardBytes + snapshot_.live.offset / kShmBlockAlignment * 16;
    const bool same = but_live_slot ? std::memcmp(copy_, want, slot) == 0 &&
                                          std::memcmp(copy_ + slot + 16, want + slot + 16, size_ - slot - 16) == 0
                                    : std::memcmp(copy_, want, size_) == 0;
    Poison();
    return same;
  }

 private:
  void Poison() const {
    ASAN_POISON_MEMORY_REGION(copy_, kGuardBytes);
    ASAN_POISON_MEMORY_REGION(copy_ + size_ - kGuardBytes, kGuardBytes);
  }
  void Unpoison() const { ASAN_UNPOISON_MEMORY_REGION(copy_, size_); }

  const LiveRegion& snapshot_;
  const size_t size_;
  char* const copy_;
};

void TakeFromLiveRegion(const ShmDescriptor& d) {
  const LiveRegion& snapshot = Snapshot();
  const RegionCopy copy(snapshot);
  char* const region = copy.region();
  ShmRingReader reader(region, kRegionBytes);
  absl::StatusOr<const char*> taken = reader.Take(d);
  const bool names_live = d.offset == snapshot.live.offset && d.seq == snapshot.live.seq;
  if (!taken.ok()) {
    CheckErrorExplains(taken.status(), "Take");
    FUZZ_CHECK(absl::IsInvalidArgument(taken.status()) || absl::IsFailedPrecondition(taken.status()), d.Encode(), ": ",
               taken.status().ToString());
    FUZZ_CHECK(!Same(d, snapshot.live), "the live block's own descriptor was refused: ", taken.status().ToString());
    // Only a descriptor of the live block's place and seq (the wrong size) may touch the region: its slot.
    FUZZ_CHECK(copy.Unchanged(names_live), d.Encode(), ": a refused Take changed the region");
    if (d.offset % kShmBlockAlignment != 0 || d.offset >= snapshot.layout.area_bytes) {
      reader.Free(d);
      FUZZ_CHECK(copy.Unchanged(false), d.Encode(), ": a Free outside the area wrote");
    }
    return;
  }
  FUZZ_CHECK(Same(d, snapshot.live), d.Encode(), " was taken; the only live block is ", snapshot.live.Encode());
  const char* payload = *taken;
  FUZZ_CHECK(payload == region + snapshot.layout.table_bytes + d.offset, "the live block's payload is elsewhere");
  for (size_t i = 0; i < d.bytes; ++i) {
    FUZZ_CHECK(payload[i] == PatternByte(i), "payload byte ", i, " differs");
  }
  FUZZ_CHECK(absl::IsFailedPrecondition(reader.Take(d).status()), d.Encode(), " was taken twice");
  reader.Free(d);
  FUZZ_CHECK(absl::IsFailedPrecondition(reader.Take(d).status()), d.Encode(), " was taken after it was freed");
  FUZZ_CHECK(copy.Unchanged(true), d.Encode(), ": a Take and Free wrote outside the block's slot");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ShmDescriptor> descriptor = ShmDescriptor::Parse(text);
  if (descriptor.ok()) {
    CheckDescriptor(*descriptor);
    TakeFromLiveRegion(*descriptor);
  } else {
    CheckRefusal(descriptor.status(), "ShmDescriptor::Parse");
  }
  absl::StatusOr<ShmOffer> offer = ShmOffer::Parse(text);
  if (offer.ok()) {
    CheckOffer(*offer);
  } else {
    CheckRefusal(offer.status(), "ShmOffer::Parse");
  }
  return 0;
}
