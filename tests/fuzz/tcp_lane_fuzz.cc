// Fuzz target: what a peer sends on a TCP lane of the grpc transport
// (common/transport/grpc/tcp_lane_wire.h): a message's fixed header, the
// chunk sizes of its meta bytes, and a server's offer text.
//
// Feeds: the input's first kTcpLaneHeaderBytes to TcpLaneHeader::Parse
// (with a payload limit of 1 MiB); when it parses, the rest (cut to the
// header's num_chunks words) to ParseTcpLaneChunkSizes. The whole input as
// text to TcpLaneOffer::Parse.
// Asserts: every refusal is INVALID_ARGUMENT with a short message; a parsed
// header is within its limits (kind known, status code <= 16 and none in a
// request, text, frame header, chunks and payload within their limits,
// chunks iff payload) and encodes to bytes that parse back to the same
// fields; parsed chunk sizes are positive and add up to the payload; a
// parsed offer has a port in 1..65535 and a 32-character lower-case hex
// secret, and encodes to a text that parses back to it.
// Seeds: tests/fuzz/corpus/tcp_lane/ (a request and an answer with chunk
// sizes, offers, and malformed variants).
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "common/transport/grpc/tcp_lane_wire.h"
#include "tests/fuzz/fuzz_util.h"

using namespace pstrain;        // NOLINT
using namespace pstrain::fuzz;  // NOLINT

namespace {

constexpr uint64_t kMaxPayload = uint64_t{1} << 20;
constexpr size_t kMaxMessage = 512;

void CheckRefusal(const absl::Status& status, absl::string_view what) {
  CheckErrorExplains(status, what);
  FUZZ_CHECK(absl::IsInvalidArgument(status), what, ": ", status.ToString());
  FUZZ_CHECK(status.message().size() <= kMaxMessage, what, ": a message of ", status.message().size(), " bytes");
}

bool Same(const TcpLaneHeader& a, const TcpLaneHeader& b) {
  return a.kind == b.kind && a.status_code == b.status_code && a.call_id == b.call_id && a.text_bytes == b.text_bytes &&
         a.frame_header_bytes == b.frame_header_bytes && a.num_chunks == b.num_chunks &&
         a.payload_bytes == b.payload_bytes;
}

void CheckHeader(const TcpLaneHeader& h) {
  FUZZ_CHECK(h.kind == TcpLaneKind::kRequest || h.kind == TcpLaneKind::kAnswer, "kind");
  FUZZ_CHECK(h.status_code <= 16 && (h.kind == TcpLaneKind::kAnswer || h.status_code == 0), "status ", h.status_code);
  FUZZ_CHECK(h.text_bytes <= kTcpLaneMaxTextBytes && h.frame_header_bytes <= kTcpLaneMaxFrameHeaderBytes &&
                 h.num_chunks <= kTcpLaneMaxChunks && h.payload_bytes <= kMaxPayload,
             "a length over its limit");
  FUZZ_CHECK((h.num_chunks == 0) == (h.payload_bytes == 0), "chunks without payload or payload without chunks");
  absl::StatusOr<TcpLaneHeader> again = TcpLaneHeader::Parse(h.Encode(), kMaxPayload);
  FUZZ_CHECK(again.ok() && Same(*again, h), "a parsed header does not parse back: ", again.status().ToString());
}

void CheckChunks(const TcpLaneHeader& h, std::string_view rest) {
  const std::string_view words = rest.substr(0, 8ull * h.num_chunks);
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseTcpLaneChunkSizes(words, h.num_chunks, h.payload_bytes);
  if (!sizes.ok()) return CheckRefusal(sizes.status(), "ParseTcpLaneChunkSizes");
  uint64_t sum = 0;
  for (uint64_t size : *sizes) {
    FUZZ_CHECK(size > 0, "an empty chunk");
    sum += size;
  }
  FUZZ_CHECK(sum == h.payload_bytes, "chunks of ", sum, " bytes for a payload of ", h.payload_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (size >= kTcpLaneHeaderBytes) {
    absl::StatusOr<TcpLaneHeader> header = TcpLaneHeader::Parse(input.substr(0, kTcpLaneHeaderBytes), kMaxPayload);
    if (header.ok()) {
      CheckHeader(*header);
      CheckChunks(*header, input.substr(kTcpLaneHeaderBytes));
    } else {
      CheckRefusal(header.status(), "TcpLaneHeader::Parse");
    }
  }
  absl::StatusOr<TcpLaneOffer> offer = TcpLaneOffer::Parse(input);
  if (!offer.ok()) {
    CheckRefusal(offer.status(), "TcpLaneOffer::Parse");
  } else {
    FUZZ_CHECK(offer->port >= 1 && offer->port <= 65535, "port ", offer->port);
    FUZZ_CHECK(offer->secret.size() == kTcpLaneSecretBytes, "a secret of ", offer->secret.size(), " characters");
    absl::StatusOr<TcpLaneOffer> again = TcpLaneOffer::Parse(offer->Encode());
    FUZZ_CHECK(again.ok() && again->port == offer->port && again->secret == offer->secret,
               "a parsed offer does not parse back");
  }
  return 0;
}
