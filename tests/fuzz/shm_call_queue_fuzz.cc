// Fuzz target: what the other process of a lane leaves in a call queue
// (common/transport/grpc/shm_call_queue.h), as the reader decodes it.
//
// Feeds: the input's first 16 bytes as the queue's head and tail positions
// (little-endian u64 each), the rest as the record bytes from the ring's
// start, in a region of the smallest size the queue takes, allocated on the
// heap exactly (so ASan reports a read past it); then Pop until it finds
// nothing or fails, at most 64 times.
// Asserts: an error is DATA_LOSS with a short message that says what is
// wrong, and the next Pop fails the same way (a broken queue stays broken);
// a record is a request, a response or a part of one, whose text, inline bytes and
// value references fit kMaxRecordPayload, carries a block only without inline
// bytes and with a sequence in range, lends values only as a response
// without a block and with a ticket, and written again into a fresh queue
// reads back the same; the tail only moves forward, by at least a record head each time,
// and never past the head.
// Seeds: tests/fuzz/corpus/shm_call_queue/, written by shm_call_queue_seeds.py
// (a request and a response, one in a block; an answer in parts; a lent
// answer; an empty queue; lends, lengths, kinds and positions that cannot be).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/transport/grpc/shm_call_queue.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

constexpr size_t kRegionBytes = ShmCallQueue::kMinRegionBytes;
constexpr size_t kHeadOffset = 0, kTailOffset = 64;  // the control words' places
constexpr size_t kMaxMessage = 512;
constexpr int kMaxPops = 64;

uint64_t Word(const char* region, size_t offset) {
  uint64_t v;
  std::memcpy(&v, region + offset, sizeof(v));
  return v;
}

void CheckRecord(const ShmCallRecord& r) {
  FUZZ_CHECK(r.kind == ShmCallRecord::Kind::kRequest || r.kind == ShmCallRecord::Kind::kResponse ||
                 r.kind == ShmCallRecord::Kind::kResponsePart,
             "kind ", static_cast<uint32_t>(r.kind));
  FUZZ_CHECK(r.text.size() + r.wire.size() + 16 * r.values.size() <= ShmCallQueue::kMaxRecordPayload, "a record of ",
             r.text.size(), " + ", r.wire.size(), " bytes and ", r.values.size(), " value references");
  if (!r.values.empty()) {
    FUZZ_CHECK(r.kind == ShmCallRecord::Kind::kResponse && !r.block.has_value() && r.lend_ticket != 0,
               "a lend in a record of kind ", static_cast<uint32_t>(r.kind), " (ticket ", r.lend_ticket, ")");
  }
  if (r.block.has_value()) {
    FUZZ_CHECK(r.wire.empty(), "a block beside ", r.wire.size(), " inline bytes");
    FUZZ_CHECK(r.block->seq >= 1 && r.block->seq < (uint64_t{1} << 62), "block sequence ", r.block->seq);
  }
  // Written again by a writer, it reads back the same.
  char* fresh = static_cast<char*>(std::aligned_alloc(64, kRegionBytes));
  FUZZ_CHECK(fresh != nullptr, "no memory");
  std::memset(fresh, 0, kRegionBytes);
  ShmCallQueue writer(fresh, kRegionBytes), reader(fresh, kRegionBytes);
  FUZZ_CHECK(writer.TryPush(r), "an empty queue refused a record it had read");
  absl::StatusOr<std::optional<ShmCallRecord>> again = reader.Pop();
  FUZZ_CHECK(again.ok() && again->has_value(),
             "a record written again does not read back: ", again.status().ToString());
  const ShmCallRecord& b = **again;
  FUZZ_CHECK(b.kind == r.kind && b.call_id == r.call_id && b.status_code == r.status_code && b.text == r.text &&
                 b.wire == r.wire && b.block.has_value() == r.block.has_value() && b.values.size() == r.values.size() &&
                 b.lend_slot == r.lend_slot && b.lend_ticket == r.lend_ticket,
             "a record written again reads back otherwise");
  for (size_t i = 0; i < r.values.size(); ++i) {
    FUZZ_CHECK(b.values[i].offset == r.values[i].offset && b.values[i].bytes == r.values[i].bytes,
               "a value reference written again reads back otherwise");
  }
  if (r.block.has_value()) {
    FUZZ_CHECK(b.block->offset == r.block->offset && b.block->bytes == r.block->bytes && b.block->seq == r.block->seq,
               "a block written again reads back otherwise");
  }
  std::free(fresh);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* region = static_cast<char*>(std::aligned_alloc(64, kRegionBytes));
  FUZZ_CHECK(region != nullptr, "no memory");
  std::memset(region, 0, kRegionBytes);
  const size_t positions = std::min<size_t>(size, 16);
  if (positions > 0) std::memcpy(region + kHeadOffset, data, std::min<size_t>(positions, 8));
  if (positions > 8) std::memcpy(region + kTailOffset, data + 8, positions - 8);
  if (size > 16) {
    std::memcpy(region + ShmCallQueue::kControlBytes, data + 16,
                std::min(size - 16, kRegionBytes - ShmCallQueue::kControlBytes));
  }
  ShmCallQueue queue(region, kRegionBytes);
  const uint64_t head = Word(region, kHeadOffset);
  uint64_t tail = Word(region, kTailOffset);
  for (int i = 0; i < kMaxPops; ++i) {
    absl::StatusOr<std::optional<ShmCallRecord>> popped = queue.Pop();
    const uint64_t now = Word(region, kTailOffset);
    FUZZ_CHECK(now >= tail && (now == tail || now <= head), "the tail moved from ", tail, " to ", now, " (head ", head,
               ")");
    if (!popped.ok()) {
      CheckErrorExplains(popped.status(), "Pop");
      FUZZ_CHECK(absl::IsDataLoss(popped.status()), popped.status().ToString());
      FUZZ_CHECK(popped.status().message().size() <= kMaxMessage, "a message of ", popped.status().message().size(),
                 " bytes");
      FUZZ_CHECK(!queue.Pop().ok(), "a broken queue gave a record after its error");
      break;
    }
    if (!popped->has_value()) break;
    FUZZ_CHECK(now - tail >= ShmCallQueue::kRecordHeadBytes, "a record of ", now - tail,
               " bytes (pads before it included)");
    CheckRecord(**popped);
    tail = now;
  }
  std::free(region);
  return 0;
}
