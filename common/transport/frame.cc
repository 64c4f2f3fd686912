#include "common/transport/frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

OutgoingFrame OutgoingFrame::FromHeader(const google::protobuf::MessageLite& header) {
  OutgoingFrame frame;
  header.SerializeToString(&frame.header);
  return frame;
}

size_t OutgoingFrame::payload_bytes() const {
  size_t n = 0;
  for (const ConstChunk& c : chunks) n += c.size;
  return n;
}

IncomingFrame::IncomingFrame(std::string header, std::vector<Piece> pieces, std::shared_ptr<const void> keepalive)
    : header_(std::move(header)), pieces_(std::move(pieces)), keepalive_(std::move(keepalive)) {
  for (const Piece& p : pieces_) total_ += p.size;
}

IncomingFrame IncomingFrame::FromOutgoing(OutgoingFrame frame) {
  auto owned = std::make_shared<OutgoingFrame>(std::move(frame));
  std::vector<Piece> pieces;
  pieces.reserve(owned->chunks.size());
  for (const ConstChunk& c : owned->chunks) {
    if (c.size > 0) pieces.push_back({static_cast<const char*>(c.data), c.size});
  }
  std::string header = owned->header;
  return IncomingFrame(std::move(header), std::move(pieces), std::move(owned));
}

bool IncomingFrame::ParseHeader(google::protobuf::MessageLite* message) const {
  return message->ParseFromString(header_);
}

absl::Status IncomingFrame::Consume(size_t n, absl::FunctionRef<void(const char*, size_t)> fn) {
  if (n > remaining()) {
    return absl::OutOfRangeError(
        absl::StrCat("frame payload too short: wanted ", n, " more bytes, ", remaining(), " remain"));
  }
  while (n > 0) {
    const Piece& p = pieces_[piece_];
    size_t take = std::min(n, p.size - piece_offset_);
    fn(p.data + piece_offset_, take);
    piece_offset_ += take;
    consumed_ += take;
    n -= take;
    if (piece_offset_ == p.size) {
      ++piece_;
      piece_offset_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status IncomingFrame::Read(void* dst, size_t n) {
  char* out = static_cast<char*>(dst);
  return Consume(n, [&out](const char* data, size_t size) {
    // A piece received in place (CallOptions::receive_into) is already there.
    if (data != out) std::memmove(out, data, size);
    out += size;
  });
}

}  // namespace pstrain

namespace pstrain {

absl::Status IncomingFrame::ConsumeFloats(size_t n, absl::FunctionRef<void(size_t, const float*, size_t)> fn) {
  if (n % sizeof(float) != 0) return absl::InvalidArgumentError(absl::StrCat(n, " bytes is not whole floats"));
  size_t next = 0;  // index of the next element to hand out
  alignas(16) float carry_storage[1];
  char* carry = reinterpret_cast<char*>(carry_storage);
  size_t carry_n = 0;
  constexpr size_t kScratch = 1024;
  alignas(64) float scratch[kScratch];
  return Consume(n, [&](const char* p, size_t s) {
    if (carry_n > 0) {
      size_t take = std::min(sizeof(float) - carry_n, s);
      std::memcpy(carry + carry_n, p, take);
      carry_n += take;
      p += take;
      s -= take;
      if (carry_n < sizeof(float)) return;  // this piece ended inside the float
      fn(next++, carry_storage, 1);
      carry_n = 0;
    }
    size_t whole = s / sizeof(float);
    if (whole > 0) {
      if (reinterpret_cast<uintptr_t>(p) % alignof(float) == 0) {
        fn(next, reinterpret_cast<const float*>(p), whole);
        next += whole;
      } else {
        for (size_t done = 0; done < whole;) {
          size_t count = std::min(kScratch, whole - done);
          std::memcpy(scratch, p + done * sizeof(float), count * sizeof(float));
          fn(next, scratch, count);
          next += count;
          done += count;
        }
      }
    }
    size_t rest = s - whole * sizeof(float);
    std::memcpy(carry, p + whole * sizeof(float), rest);
    carry_n = rest;
  });
}

absl::StatusOr<IncomingFrame> IncomingFrame::FromWire(std::vector<Piece> pieces,
                                                      std::shared_ptr<const void> keepalive) {
  IncomingFrame all(std::string(), std::move(pieces), std::move(keepalive));
  // varint32 header length.
  uint32_t header_len = 0;
  for (int shift = 0;; shift += 7) {
    if (shift > 28) return absl::InvalidArgumentError("frame: malformed header length");
    uint8_t byte;
    if (!all.Read(&byte, 1).ok()) return absl::InvalidArgumentError("frame: truncated header length");
    header_len |= static_cast<uint32_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) break;
  }
  if (header_len > all.remaining()) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame: header of ", header_len, " bytes but only ", all.remaining(), " bytes follow"));
  }
  all.header_.resize(header_len);
  PSTRAIN_RETURN_IF_ERROR(all.Read(all.header_.data(), header_len));
  // Re-base so payload_bytes() counts the payload only.
  all.total_ -= all.consumed_;
  all.consumed_ = 0;
  return all;
}

// Encodes the varint32 length prefix followed by the header.
std::string EncodeWireHeader(const std::string& header) {
  std::string out;
  uint32_t n = static_cast<uint32_t>(header.size());
  while (n >= 0x80) {
    out.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  out.push_back(static_cast<char>(n));
  out += header;
  return out;
}

}  // namespace pstrain
