// The bytes of a TCP lane (tcp_lane_client.h): the grpc transport's own socket for
// large frames between hosts, beside gRPC.
//
// A client learns the lane's port and secret from an attach call through
// gRPC (TcpLaneOffer, in the answer's trailing metadata), connects, and sends
// kTcpLaneHello followed by the secret's 32 bytes; the server answers
// kTcpLaneWelcome, or closes the connection. Then both ends send messages:
//
//   TcpLaneHeader (kTcpLaneHeaderBytes, little-endian)
//   text          (text_bytes: a request's method, a failed answer's message)
//   frame header  (frame_header_bytes: the frame's serialized header)
//   chunk sizes   (num_chunks little-endian uint64: the payload's pieces as
//                  the sender had them, so the receiver can place each one)
//   payload       (payload_bytes = the sum of the chunk sizes)
//
// Requests carry a call id of the client's choice; an answer carries its
// request's id and a status code (absl::StatusCode). Either side may send
// several messages before the other answers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain {

inline constexpr char kTcpLaneHello[] = "PSTLANE1";    // 8 bytes, then the secret
inline constexpr char kTcpLaneWelcome[] = "PSTLOK01";  // 8 bytes
inline constexpr size_t kTcpLaneGreetingBytes = 8;
inline constexpr size_t kTcpLaneSecretBytes = 32;
inline constexpr size_t kTcpLaneHeaderBytes = 40;
// Limits a receiver enforces (a message beyond them is malformed).
inline constexpr uint32_t kTcpLaneMaxTextBytes = 64 * 1024;
inline constexpr uint32_t kTcpLaneMaxFrameHeaderBytes = 16 * 1024 * 1024;
inline constexpr uint32_t kTcpLaneMaxChunks = 64 * 1024;

enum class TcpLaneKind : uint8_t { kRequest = 1, kAnswer = 2 };

struct TcpLaneHeader {
  TcpLaneKind kind = TcpLaneKind::kRequest;
  uint32_t status_code = 0;  // answers: an absl::StatusCode; 0 in requests
  uint64_t call_id = 0;
  uint32_t text_bytes = 0;
  uint32_t frame_header_bytes = 0;
  uint32_t num_chunks = 0;
  uint64_t payload_bytes = 0;

  std::string Encode() const;
  // The kTcpLaneHeaderBytes at `bytes`. INVALID_ARGUMENT naming the field
  // that is wrong: magic, version, kind, a status code outside absl's, a
  // length over its limit, a payload over `max_payload_bytes`, or chunks
  // that cannot hold the payload (none for a payload, or a payload with none).
  static absl::StatusOr<TcpLaneHeader> Parse(std::string_view bytes, uint64_t max_payload_bytes);
  // The bytes that follow the fixed header before the payload.
  uint64_t meta_bytes() const { return uint64_t{text_bytes} + frame_header_bytes + 8ull * num_chunks; }
};

// The chunk sizes at the end of a message's meta bytes (num_chunks of
// them). INVALID_ARGUMENT when they do not add up to `payload_bytes`.
absl::StatusOr<std::vector<uint64_t>> ParseTcpLaneChunkSizes(std::string_view bytes, uint32_t num_chunks,
                                                             uint64_t payload_bytes);
// The meta bytes of a message: text, frame header, chunk sizes.
std::string EncodeTcpLaneMeta(std::string_view text, std::string_view frame_header,
                              const std::vector<uint64_t>& chunk_sizes);

// Where a server's lane listens, and what a client must present.
// Travels as "<port>|<secret: 32 characters [0-9a-f]>".
struct TcpLaneOffer {
  int port = 0;
  std::string secret;  // kTcpLaneSecretBytes

  std::string Encode() const;
  // INVALID_ARGUMENT naming what is wrong with `text`.
  static absl::StatusOr<TcpLaneOffer> Parse(std::string_view text);
  // A fresh offer with a random secret (the port to be filled in).
  static TcpLaneOffer WithRandomSecret();
};

}  // namespace pstrain
