// ShmCallQueue: one direction of a lane's calls (shm_lane_calls.h): records
// written by one process and read by one thread of another, in a byte ring
// of a shared segment, with a futex word the reader sleeps on.
//
// A record is a request (its call id, method and frame), a response (the
// call id, a status and the answer's frame, which may be lent: references
// into the server's SharedValues), or a part of an answer that
// found no room in the writer's ring: its wire bytes travel in slices, each
// a response part, the last slice in the response itself. A frame travels inline (its
// wire bytes: EncodeWireHeader(header) + payload) when small, or as the
// descriptor of a block of the writer's ShmRing holding those wire bytes.
// The region starts with the ring's control words (head, tail, the futex
// word and the reader's "asleep" flag, on cache lines of their own) and
// holds the records after them. Positions count bytes ever written and read;
// records are 8-byte aligned and never split: one that does not fit before
// the end is preceded by a pad record that takes the rest.
//
// The reader decodes what another process wrote: Pop checks every field
// against the region and says what is wrong (DATA_LOSS) instead of trusting
// it; a queue that has given one bad record is broken for good (its owner
// drops the lane).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/grpc/shm_ring.h"

namespace pstrain {

// A piece of a lent answer's payload: bytes of the server's SharedValues
// (shm_lends.h).
struct ShmValueRef {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct ShmCallRecord {
  enum class Kind : uint32_t { kRequest = 1, kResponse = 2, kResponsePart = 3 };
  Kind kind = Kind::kRequest;
  uint64_t call_id = 0;
  int32_t status_code = 0;             // a response's absl::StatusCode
  std::string text;                    // the request's method, or the response's error message
  std::string wire;                    // the frame's wire bytes, when inline
  std::optional<ShmDescriptor> block;  // else: the block of the writer's ring holding them
  // A lent answer (shm_lends.h): `wire` holds the wire header alone and the
  // payload is these pieces of the server's arena, lent under `lend_slot`
  // with `lend_ticket` (never with a block; responses only).
  std::vector<ShmValueRef> values;
  uint32_t lend_slot = 0;
  uint64_t lend_ticket = 0;
};

class ShmCallQueue {
 public:
  // The control words and the record bytes of a region.
  static constexpr size_t kControlBytes = 256;
  // The most text, inline wire bytes and value references (16 bytes each)
  // one record may carry together.
  static constexpr size_t kMaxRecordPayload = 96 * 1024;
  // The head each record starts with.
  static constexpr size_t kRecordHeadBytes = 72;
  // The smallest region a queue takes: its control words and four of the
  // largest records, rounded up to whole cache lines.
  static constexpr size_t kMinRegionBytes = (kControlBytes + 4 * (kRecordHeadBytes + kMaxRecordPayload) + 63) / 64 * 64;

  // Over `region` of `bytes` (8-byte aligned, at least kMinRegionBytes;
  // zero-filled when new: both ends then agree on an empty ring). Not owned.
  ShmCallQueue(char* region, size_t bytes);

  // Writer's side (one thread at a time). False when the ring has no room
  // for `record` now (nothing written then); a record whose text and wire
  // exceed kMaxRecordPayload is a programming error.
  bool TryPush(const ShmCallRecord& record);
  // Wakes the reader if it sleeps (after one or more TryPush).
  void Ring();

  // Reader's side (one thread). The next record, nullopt when there is none,
  // DATA_LOSS when what the writer left cannot be a record.
  absl::StatusOr<std::optional<ShmCallRecord>> Pop();
  // Sleeps until a record may be waiting, Ring() is called, or `timeout`
  // passes (spurious returns are allowed). With `spin`, first polls that
  // long for a record (a wake-up costs tens of microseconds on a VM).
  void Wait(absl::Duration timeout, absl::Duration spin = absl::ZeroDuration());

 private:
  struct Control;
  Control* control() const;
  // Polls for a record for up to `spin`; true when one waits.
  bool Spin(absl::Duration spin) const;

  char* const region_;
  char* const data_;
  const uint64_t capacity_;  // record bytes, a multiple of 8
};

}  // namespace pstrain
