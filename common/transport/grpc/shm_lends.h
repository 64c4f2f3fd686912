// Answers a lane lends instead of copying: a server's answer whose payload
// lies wholly in the server's SharedValues (a PS shard's variable values)
// travels through the lane's responses queue as references into that arena,
// and the client reads the bytes in place (one copy, into its model, instead
// of a copy into the lane and another out of it).
//
// The words both ends share live in the lane's state page (ShmLendWords):
// the server names its arena there when it accepts the lane; the client maps
// it (PeerValues) and says so; only then does the server lend. A lend holds
// the answer's buffers (their owners) in one of kLendSlots slots, marked with
// a ticket in the slot's word, until the client's frame is gone and it
// clears the word; the server drops the owners of cleared slots at its next
// lend (so a value buffer is never reused while a client may read it). When
// no slot is free, or the payload is not all in the arena, the answer is
// copied into the lane as before. A client that dies holding lends leaves
// them to the lane, which the server drops once the client has exited; a
// lane dropped while its client lives keeps what it lent for the life of
// the process, as the client may still read it.
//
// The client checks what it is given (a slot past the table, a zero ticket,
// references outside the arena: DATA_LOSS), as for every record.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/frame.h"
#include "common/transport/grpc/shm_call_queue.h"
#include "common/transport/shared_values.h"

namespace pstrain {

inline constexpr uint32_t kLendSlots = 448;

// In the lane's state page, zero until the server accepts.
struct ShmLendWords {
  int32_t values_fd;      // the server's arena, when it has one (values_bytes > 0)
  uint32_t client_reads;  // the client has mapped it: the server may lend
  uint64_t values_bytes;
  uint64_t ticket[kLendSlots];  // 0: free (or given back); else the lend's ticket
};

// What one lend put in a record.
struct ShmLend {
  std::vector<ShmValueRef> refs;
  uint32_t slot = 0;
  uint64_t ticket = 0;
};

// The server's side.
class ShmLender {
 public:
  explicit ShmLender(ShmLendWords* words) : words_(words) {}
  // Names this process's arena in the shared words (none: nothing to lend).
  void Advertise();
  // Lends `frame`'s payload when the client reads the arena, the payload is
  // all in it (at least `min_bytes`, in at most `max_refs` pieces, each chunk
  // with an owner) and a slot is free; holds its chunks' owners until the
  // client gives them back.
  std::optional<ShmLend> Lend(const OutgoingFrame& frame, size_t min_bytes, size_t max_refs);
  // Takes back a lend whose record never reached the client.
  void TakeBack(const ShmLend& lend);
  // The lane goes: lends not given back are kept for the life of the
  // process (their client may still read them) unless `reader_gone`.
  void Abandon(bool reader_gone);

 private:
  // Drops the owners of the slots the client gave back.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ShmLendWords* const words_;
  absl::Mutex mu_;
  std::vector<std::vector<std::shared_ptr<const void>>> held_ ABSL_GUARDED_BY(mu_) =
      std::vector<std::vector<std::shared_ptr<const void>>>(kLendSlots);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
};

// The client's side.
class ShmBorrower {
 public:
  explicit ShmBorrower(ShmLendWords* words) : words_(words) {}
  // Maps the arena the server named (if any) and tells the server it may
  // lend; false when there is none or it cannot be mapped here.
  bool MapServerValues(int64_t server_pid);
  // The frame of a lent answer: `wire` holds its wire header; the payload is
  // read in place; the lend goes back when the frame is gone, which
  // `keepalive` (the lane) outlives. DATA_LOSS for a lend that cannot be one.
  absl::StatusOr<IncomingFrame> Read(std::string wire, const ShmLend& lend, std::shared_ptr<const void> keepalive);

 private:
  ShmLendWords* const words_;
  absl::Mutex mu_;
  std::unique_ptr<PeerValues> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
