// Frame: the unit every PS transport moves.
//
// A frame is a serialized header message plus raw payload bytes that follow it
// (see proto/ps.proto for the layout). Outgoing payload is a list of chunks
// that point at memory kept alive by their owners, so tensors are sent without
// copies; incoming payload is a sequence of contiguous pieces (gRPC slices, or
// the sender's chunks in-process) read front to back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"

namespace pstrain {

// Read-only bytes that stay valid while `owner` is alive.
struct ConstChunk {
  const void* data = nullptr;
  size_t size = 0;
  std::shared_ptr<const void> owner;
};

struct OutgoingFrame {
  std::string header;  // a serialized header message
  std::vector<ConstChunk> chunks;

  static OutgoingFrame FromHeader(const google::protobuf::MessageLite& header);
  size_t payload_bytes() const;
};

class IncomingFrame {
 public:
  struct Piece {
    const char* data;
    size_t size;
  };
  IncomingFrame() = default;
  // `pieces` stay valid while `keepalive` is alive.
  IncomingFrame(std::string header, std::vector<Piece> pieces, std::shared_ptr<const void> keepalive);
  // An in-process frame viewing `frame`'s chunks without copying.
  static IncomingFrame FromOutgoing(OutgoingFrame frame);

  const std::string& header() const { return header_; }
  bool ParseHeader(google::protobuf::MessageLite* message) const;
  size_t payload_bytes() const { return total_; }
  size_t remaining() const { return total_ - consumed_; }

  // Hands the next `n` payload bytes to `fn`, one contiguous piece at a time.
  // OutOfRange if fewer than n bytes remain (nothing is consumed then).
  absl::Status Consume(size_t n, absl::FunctionRef<void(const char* data, size_t size)> fn);
  // Copies the next `n` bytes into `dst` (nothing for bytes already there:
  // pieces received in place, CallOptions::receive_into).
  absl::Status Read(void* dst, size_t n);
  // Hands the next `n` bytes (a multiple of 4) to `fn` as aligned float runs:
  // fn(first_element_index, floats, count). Pieces that split a float or are
  // misaligned go through a small aligned scratch buffer.
  absl::Status ConsumeFloats(size_t n, absl::FunctionRef<void(size_t first, const float* data, size_t count)> fn);

  // Splits a wire frame (varint32 header length, header, payload) held in
  // `pieces` into header and payload.
  static absl::StatusOr<IncomingFrame> FromWire(std::vector<Piece> pieces, std::shared_ptr<const void> keepalive);

 private:
  std::string header_;
  std::vector<Piece> pieces_;
  std::shared_ptr<const void> keepalive_;
  size_t total_ = 0;
  size_t consumed_ = 0;
  size_t piece_ = 0;         // current piece
  size_t piece_offset_ = 0;  // bytes consumed of the current piece
};

// The wire prefix of a frame: varint32 length of `header`, then `header`.
std::string EncodeWireHeader(const std::string& header);

}  // namespace pstrain
