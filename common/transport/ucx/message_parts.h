// Message parts: how the ucx transport sends one frame as several active
// messages, so that every large tensor travels from its own contiguous buffer.
//
// Why. UCX 1.13 moves a rendezvous message zero-copy (RDMA read on
// InfiniBand/RoCE, cross-memory attach within a host) only when its data is
// one contiguous buffer; an I/O vector falls back to a pipeline of bounce
// buffers (two copies on shared memory). So a frame whose chunks are large is
// split: each chunk of at least kOwnPartBytes becomes a part of its own, and
// the runs of smaller pieces between them (the text, the wire header, small
// tensors) are parts sent as I/O vectors. A frame without a large chunk is
// one part, as before.
//
// Receiving. Each part arrives as its own active message carrying
// (call id, kind, part index, part count) in its AM header, possibly out of
// order. PartAssembler collects the parts of one message in their own
// buffers; once all arrived, the message is their concatenation (the frame's
// payload pieces are the parts, so nothing is copied to join them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::ucx_parts {

// Chunks of at least this many bytes are sent as parts of their own: well
// above every UCX rendezvous threshold, so they go zero-copy; small enough
// that a layer's weights qualify.
inline constexpr size_t kOwnPartBytes = size_t{256} << 10;
// The most parts one message may have; more is malformed.
inline constexpr uint32_t kMaxParts = 1u << 16;

// Consecutive entries [first, first + count) of a piece list that form one part.
struct PartSpan {
  size_t first = 0;
  size_t count = 0;
};

// Splits pieces of the given sizes into parts: every piece of at least
// `own_part_bytes` alone, the runs between them grouped. Zero-sized pieces
// join the run they are in. Always at least one part (an empty list: one
// empty part).
std::vector<PartSpan> SplitIntoParts(const std::vector<size_t>& piece_sizes, size_t own_part_bytes = kOwnPartBytes);

// A message being assembled is identified by the endpoint it came on, its
// kind and its call id.
struct MessageKey {
  const void* endpoint = nullptr;
  uint16_t kind = 0;
  uint64_t call_id = 0;
  bool operator<(const MessageKey& o) const {
    return std::tie(endpoint, kind, call_id) < std::tie(o.endpoint, o.kind, o.call_id);
  }
};

struct ReceivedPart {
  std::shared_ptr<char> data;
  size_t length = 0;
  uint32_t text_bytes = 0;               // part 0: bytes of text (method or status message) at its start
  uint64_t payload_offset = UINT64_MAX;  // where the sender said it starts in the payload (ucx_wire)
};

// Whether every part after the first that names a payload offset (not
// UINT64_MAX) starts there, in a message whose first `text_bytes` are text
// and whose last `payload_bytes` are the frame's payload. INVALID_ARGUMENT
// naming the first part that does not (it may have been received in place
// by that offset).
absl::Status CheckPayloadOffsets(const std::vector<ReceivedPart>& parts, size_t text_bytes, uint64_t payload_bytes);

// Collects the parts of multi-part messages. Not thread-safe: the ucx
// transport's progress thread alone uses it.
class PartAssembler {
 public:
  explicit PartAssembler(int64_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  // A part was announced (its active message arrived; its data may still be
  // on the way). OK: receive it. Otherwise the message is refused:
  // INVALID_ARGUMENT if malformed (`parts` must be the same on every part of
  // a message, and each index must come once), RESOURCE_EXHAUSTED if its
  // parts together exceed max_message_bytes. Once refused, the message's
  // other parts are refused too, with *quiet set (the refusal was reported
  // already).
  absl::Status Announce(const MessageKey& key, uint32_t part, uint32_t parts, size_t length, bool* quiet);

  // A part announced with Announce has all its data. Returns the whole
  // message's parts, in order, once the last one is in; otherwise empty.
  // Parts of a message that was refused (or forgotten) meanwhile are dropped.
  std::vector<ReceivedPart> Complete(const MessageKey& key, uint32_t part, ReceivedPart data);

  // Forgets the messages of an endpoint (it failed or closed), or one message
  // (its call ended). Parts still arriving for them are dropped.
  void ForgetEndpoint(const void* endpoint);
  void Forget(const MessageKey& key);

  size_t in_progress() const { return messages_.size(); }

 private:
  struct Assembly {
    uint32_t parts = 0;
    uint32_t announced = 0;
    uint32_t completed = 0;
    size_t bytes = 0;
    bool refused = false;
    std::vector<bool> seen;
    std::vector<ReceivedPart> data;
  };
  // Drops a refused message once every part of it was announced.
  void RetireIfRefused(std::map<MessageKey, Assembly>::iterator it);

  const int64_t max_message_bytes_;
  std::map<MessageKey, Assembly> messages_;
};

}  // namespace pstrain::ucx_parts
