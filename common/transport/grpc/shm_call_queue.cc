#include "common/transport/grpc/shm_call_queue.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

// A record as it lies in the ring (then its text, then its inline wire bytes).
struct RecordHead {
  uint32_t bytes;  // the whole record, padded to 8
  uint32_t kind;   // kPad, or ShmCallRecord::Kind
  uint64_t call_id;
  int32_t status_code;
  uint32_t text_bytes;
  uint32_t wire_bytes;
  uint32_t has_block;
  uint64_t block_offset;
  uint64_t block_bytes;
  uint64_t block_seq;
  uint32_t value_refs;  // then, after the wire bytes, this many {offset, bytes}
  uint32_t lend_slot;
  uint64_t lend_ticket;
};
static_assert(sizeof(RecordHead) == ShmCallQueue::kRecordHeadBytes);
constexpr size_t kRefBytes = 2 * sizeof(uint64_t);
constexpr uint32_t kPad = 0;  // skips the rest of the ring to its end
constexpr size_t kPadBytes = 8;

uint64_t RoundUp8(uint64_t n) { return ShmRoundUp(n, 8); }

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("shared memory call queue: ", what));
}

long Futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {  // NOLINT(runtime/int)
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

// On cache lines of their own: the writer's head, the reader's tail, the
// futex word and the reader's "asleep" flag.
struct ShmCallQueue::Control {
  alignas(64) uint64_t head;  // bytes ever written
  alignas(64) uint64_t tail;  // bytes ever read
  alignas(64) uint32_t bell;  // bumped by every Ring
  uint32_t asleep;            // the reader is in (or entering) Wait
};
static_assert(std::atomic_ref<uint64_t>::is_always_lock_free && std::atomic_ref<uint32_t>::is_always_lock_free,
              "the control words are shared between processes");

ShmCallQueue::ShmCallQueue(char* region, size_t bytes)
    : region_(region), data_(region + kControlBytes), capacity_((bytes - kControlBytes) / 8 * 8) {
  static_assert(sizeof(Control) <= kControlBytes);
  CHECK_EQ(reinterpret_cast<uintptr_t>(region) % 64, 0u);
  CHECK_GE(bytes, kMinRegionBytes);
}

ShmCallQueue::Control* ShmCallQueue::control() const { return reinterpret_cast<Control*>(region_); }

bool ShmCallQueue::TryPush(const ShmCallRecord& record) {
  const size_t body = record.text.size() + record.wire.size() + record.values.size() * kRefBytes;
  CHECK_LE(body, kMaxRecordPayload);
  const uint64_t need = RoundUp8(sizeof(RecordHead) + body);
  Control* c = control();
  const uint64_t head = std::atomic_ref<uint64_t>(c->head).load(std::memory_order_relaxed);
  const uint64_t tail = std::atomic_ref<uint64_t>(c->tail).load(std::memory_order_acquire);
  uint64_t pos = head % capacity_;
  const uint64_t pad = need > capacity_ - pos ? capacity_ - pos : 0;
  if (head + pad + need - tail > capacity_) return false;
  if (pad > 0) {
    const uint32_t marker[2] = {static_cast<uint32_t>(pad), kPad};
    std::memcpy(data_ + pos, marker, kPadBytes);
    pos = 0;
  }
  RecordHead h{};
  h.bytes = static_cast<uint32_t>(need);
  h.kind = static_cast<uint32_t>(record.kind);
  h.call_id = record.call_id;
  h.status_code = record.status_code;
  h.text_bytes = static_cast<uint32_t>(record.text.size());
  h.wire_bytes = static_cast<uint32_t>(record.wire.size());
  if (record.block.has_value()) {
    h.has_block = 1;
    h.block_offset = record.block->offset;
    h.block_bytes = record.block->bytes;
    h.block_seq = record.block->seq;
  }
  h.value_refs = static_cast<uint32_t>(record.values.size());
  h.lend_slot = record.lend_slot;
  h.lend_ticket = record.lend_ticket;
  char* out = data_ + pos;
  std::memcpy(out, &h, sizeof(h));
  out += sizeof(h);
  std::memcpy(out, record.text.data(), record.text.size());
  out += record.text.size();
  std::memcpy(out, record.wire.data(), record.wire.size());
  out += record.wire.size();
  for (const ShmValueRef& ref : record.values) {
    const uint64_t words[2] = {ref.offset, ref.bytes};
    std::memcpy(out, words, kRefBytes);
    out += kRefBytes;
  }
  std::atomic_ref<uint64_t>(c->head).store(head + pad + need, std::memory_order_seq_cst);
  return true;
}

void ShmCallQueue::Ring() {
  Control* c = control();
  std::atomic_ref<uint32_t>(c->bell).fetch_add(1, std::memory_order_seq_cst);
  if (std::atomic_ref<uint32_t>(c->asleep).load(std::memory_order_seq_cst) != 0) {
    Futex(&c->bell, FUTEX_WAKE, 1, nullptr);
  }
}

bool ShmCallQueue::Spin(absl::Duration spin) const {
  Control* c = control();
  const int64_t until = absl::GetCurrentTimeNanos() + absl::ToInt64Nanoseconds(spin);
  do {
    if (std::atomic_ref<uint64_t>(c->head).load(std::memory_order_acquire) !=
        std::atomic_ref<uint64_t>(c->tail).load(std::memory_order_relaxed)) {
      return true;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } while (absl::GetCurrentTimeNanos() < until);
  return false;
}

void ShmCallQueue::Wait(absl::Duration timeout, absl::Duration spin) {
  if (spin > absl::ZeroDuration() && Spin(std::min(spin, timeout))) return;
  Control* c = control();
  const uint32_t seen = std::atomic_ref<uint32_t>(c->bell).load(std::memory_order_acquire);
  std::atomic_ref<uint32_t>(c->asleep).store(1, std::memory_order_seq_cst);
  const bool waiting = std::atomic_ref<uint64_t>(c->head).load(std::memory_order_seq_cst) !=
                       std::atomic_ref<uint64_t>(c->tail).load(std::memory_order_relaxed);
  if (!waiting && timeout > absl::ZeroDuration()) {
    const timespec ts = absl::ToTimespec(timeout);
    Futex(&c->bell, FUTEX_WAIT, seen, &ts);  // returns at once if the bell moved since `seen`
  }
  std::atomic_ref<uint32_t>(c->asleep).store(0, std::memory_order_relaxed);
}

absl::StatusOr<std::optional<ShmCallRecord>> ShmCallQueue::Pop() {
  Control* c = control();
  uint64_t tail = std::atomic_ref<uint64_t>(c->tail).load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t head = std::atomic_ref<uint64_t>(c->head).load(std::memory_order_acquire);
    if (head == tail) return std::nullopt;
    if (head < tail || head - tail > capacity_) {
      return Corrupt(absl::StrCat("written up to ", head, ", read up to ", tail, ", in a ring of ", capacity_));
    }
    const uint64_t available = head - tail, pos = tail % capacity_;
    if (tail % 8 != 0 || available < kPadBytes) return Corrupt(absl::StrCat("a record at ", tail, " is cut short"));
    uint32_t first[2];
    std::memcpy(first, data_ + pos, sizeof(first));
    const uint64_t bytes = first[0];
    if (bytes < kPadBytes || bytes % 8 != 0 || bytes > available || bytes > capacity_ - pos) {
      return Corrupt(absl::StrCat("a record of ", bytes, " bytes at ", tail, " (", available, " written)"));
    }
    if (first[1] == kPad) {
      if (pos + bytes != capacity_) return Corrupt(absl::StrCat("a pad record at ", tail, " ends before the ring"));
      tail += bytes;
      std::atomic_ref<uint64_t>(c->tail).store(tail, std::memory_order_release);
      continue;
    }
    RecordHead h;
    if (bytes < sizeof(h)) return Corrupt(absl::StrCat("a record of ", bytes, " bytes is shorter than its head"));
    std::memcpy(&h, data_ + pos, sizeof(h));  // read once: the fields checked are the fields used
    const uint64_t body = uint64_t{h.text_bytes} + h.wire_bytes + uint64_t{h.value_refs} * kRefBytes;
    if (h.kind < static_cast<uint32_t>(ShmCallRecord::Kind::kRequest) ||
        h.kind > static_cast<uint32_t>(ShmCallRecord::Kind::kResponsePart)) {
      return Corrupt(absl::StrCat("a record of kind ", h.kind));
    }
    if (h.value_refs > 0 &&
        (h.kind != static_cast<uint32_t>(ShmCallRecord::Kind::kResponse) || h.has_block != 0 || h.lend_ticket == 0)) {
      return Corrupt(absl::StrCat("a record of kind ", h.kind, " lending ", h.value_refs, " pieces (block ",
                                  h.has_block, ", ticket ", h.lend_ticket, ")"));
    }
    if (body > kMaxRecordPayload || RoundUp8(sizeof(h) + body) != bytes || h.has_block > 1 ||
        (h.has_block == 1 && (h.wire_bytes != 0 || h.block_seq == 0 || h.block_seq >= (uint64_t{1} << 62)))) {
      return Corrupt(absl::StrCat("a record of ", bytes, " bytes holding ", h.text_bytes, " + ", h.wire_bytes,
                                  " bytes, block ", h.has_block, " (seq ", h.block_seq, ")"));
    }
    ShmCallRecord record;
    record.kind = static_cast<ShmCallRecord::Kind>(h.kind);
    record.call_id = h.call_id;
    record.status_code = h.status_code;
    const char* text = data_ + pos + sizeof(h);
    record.text.assign(text, h.text_bytes);
    record.wire.assign(text + h.text_bytes, h.wire_bytes);
    const char* refs = text + h.text_bytes + h.wire_bytes;
    record.values.resize(h.value_refs);
    for (ShmValueRef& ref : record.values) {
      uint64_t words[2];
      std::memcpy(words, refs, kRefBytes);
      ref = {words[0], words[1]};
      refs += kRefBytes;
    }
    record.lend_slot = h.lend_slot;
    record.lend_ticket = h.lend_ticket;
    if (h.has_block == 1) record.block = ShmDescriptor{h.block_offset, h.block_bytes, h.block_seq};
    std::atomic_ref<uint64_t>(c->tail).store(tail + bytes, std::memory_order_release);
    return record;
  }
}

}  // namespace pstrain
