#include "common/transport/grpc/tcp_lane_wire.h"

#include <cstring>
#include <random>

#include "absl/base/internal/endian.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pstrain {
namespace {

// Fixed header: magic "PSTM" | version u8 | kind u8 | reserved u16 |
// status u32 | text u32 | frame header u32 | chunks u32 | call id u64 |
// payload u64.
constexpr char kMagic[] = "PSTM";
constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxStatusCode = 16;  // absl::StatusCode::kUnauthenticated

void PutU32(char* at, uint32_t v) { absl::little_endian::Store32(at, v); }
void PutU64(char* at, uint64_t v) { absl::little_endian::Store64(at, v); }
uint32_t GetU32(const char* at) { return absl::little_endian::Load32(at); }
uint64_t GetU64(const char* at) { return absl::little_endian::Load64(at); }

absl::string_view Absl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed TCP lane message: ", Absl(what)));
}

}  // namespace

std::string TcpLaneHeader::Encode() const {
  std::string out(kTcpLaneHeaderBytes, '\0');
  char* p = out.data();
  std::memcpy(p, kMagic, 4);
  p[4] = static_cast<char>(kVersion);
  p[5] = static_cast<char>(kind);
  PutU32(p + 8, status_code);
  PutU32(p + 12, text_bytes);
  PutU32(p + 16, frame_header_bytes);
  PutU32(p + 20, num_chunks);
  PutU64(p + 24, call_id);
  PutU64(p + 32, payload_bytes);
  return out;
}

absl::StatusOr<TcpLaneHeader> TcpLaneHeader::Parse(std::string_view bytes, uint64_t max_payload_bytes) {
  if (bytes.size() != kTcpLaneHeaderBytes) {
    return Malformed(absl::StrCat("a header of ", bytes.size(), " bytes, not ", kTcpLaneHeaderBytes));
  }
  const char* p = bytes.data();
  if (std::memcmp(p, kMagic, 4) != 0) return Malformed("no magic (not a TCP lane peer?)");
  if (static_cast<uint8_t>(p[4]) != kVersion) {
    return Malformed(absl::StrCat("version ", static_cast<int>(static_cast<uint8_t>(p[4])), ", this end speaks ",
                                  static_cast<int>(kVersion)));
  }
  TcpLaneHeader h;
  const uint8_t kind = static_cast<uint8_t>(p[5]);
  if (kind != static_cast<uint8_t>(TcpLaneKind::kRequest) && kind != static_cast<uint8_t>(TcpLaneKind::kAnswer)) {
    return Malformed(absl::StrCat("kind ", static_cast<int>(kind)));
  }
  h.kind = static_cast<TcpLaneKind>(kind);
  h.status_code = GetU32(p + 8);
  h.text_bytes = GetU32(p + 12);
  h.frame_header_bytes = GetU32(p + 16);
  h.num_chunks = GetU32(p + 20);
  h.call_id = GetU64(p + 24);
  h.payload_bytes = GetU64(p + 32);
  if (h.status_code > kMaxStatusCode) return Malformed(absl::StrCat("status code ", h.status_code));
  if (h.kind == TcpLaneKind::kRequest && h.status_code != 0) return Malformed("a request with a status code");
  if (h.text_bytes > kTcpLaneMaxTextBytes) return Malformed(absl::StrCat("text of ", h.text_bytes, " bytes"));
  if (h.frame_header_bytes > kTcpLaneMaxFrameHeaderBytes) {
    return Malformed(absl::StrCat("frame header of ", h.frame_header_bytes, " bytes"));
  }
  if (h.num_chunks > kTcpLaneMaxChunks) return Malformed(absl::StrCat(h.num_chunks, " chunks"));
  if (h.payload_bytes > max_payload_bytes) {
    return Malformed(absl::StrCat("payload of ", h.payload_bytes, " bytes, over the limit of ", max_payload_bytes));
  }
  if ((h.payload_bytes == 0) != (h.num_chunks == 0)) {
    return Malformed(absl::StrCat(h.num_chunks, " chunks for a payload of ", h.payload_bytes, " bytes"));
  }
  return h;
}

absl::StatusOr<std::vector<uint64_t>> ParseTcpLaneChunkSizes(std::string_view bytes, uint32_t num_chunks,
                                                             uint64_t payload_bytes) {
  if (bytes.size() != 8ull * num_chunks) {
    return Malformed(absl::StrCat(bytes.size(), " bytes of chunk sizes for ", num_chunks, " chunks"));
  }
  std::vector<uint64_t> sizes(num_chunks);
  uint64_t sum = 0;
  for (uint32_t i = 0; i < num_chunks; ++i) {
    sizes[i] = GetU64(bytes.data() + 8ull * i);
    if (sizes[i] == 0 || sizes[i] > payload_bytes - sum) {
      return Malformed(absl::StrCat("chunk ", i, " of ", sizes[i], " bytes in a payload of ", payload_bytes));
    }
    sum += sizes[i];
  }
  if (sum != payload_bytes) return Malformed(absl::StrCat("chunks of ", sum, " bytes, payload ", payload_bytes));
  return sizes;
}

std::string EncodeTcpLaneMeta(std::string_view text, std::string_view frame_header,
                              const std::vector<uint64_t>& chunk_sizes) {
  std::string out;
  out.reserve(text.size() + frame_header.size() + 8 * chunk_sizes.size());
  out.append(text);
  out.append(frame_header);
  for (uint64_t size : chunk_sizes) {
    char word[8];
    PutU64(word, size);
    out.append(word, 8);
  }
  return out;
}

std::string TcpLaneOffer::Encode() const { return absl::StrCat(port, "|", secret); }

absl::StatusOr<TcpLaneOffer> TcpLaneOffer::Parse(std::string_view text) {
  const std::vector<absl::string_view> fields = absl::StrSplit(Absl(text), '|');
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("TCP lane offer '", absl::CHexEscape(Absl(text.substr(0, 80))), "': ", what));
  };
  if (fields.size() != 2) return bad("not <port>|<secret>");
  TcpLaneOffer offer;
  if (!absl::SimpleAtoi(fields[0], &offer.port) || offer.port < 1 || offer.port > 65535) return bad("bad port");
  if (fields[1].size() != kTcpLaneSecretBytes) return bad("a secret of the wrong length");
  for (char c : fields[1]) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return bad("a secret that is not lower-case hex");
  }
  offer.secret = std::string(fields[1]);
  return offer;
}

TcpLaneOffer TcpLaneOffer::WithRandomSecret() {
  std::random_device device;  // the kernel's random source
  constexpr char kHex[] = "0123456789abcdef";
  TcpLaneOffer offer;
  offer.secret.resize(kTcpLaneSecretBytes);
  for (size_t i = 0; i < kTcpLaneSecretBytes; i += 8) {
    uint32_t word = device();
    for (size_t j = 0; j < 8; ++j, word >>= 4) offer.secret[i + j] = kHex[word & 15];
  }
  return offer;
}

}  // namespace pstrain
