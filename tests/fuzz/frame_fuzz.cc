// Fuzz target: the wire frame decoder (common/transport/frame.h).
//
// Feeds: input byte 0 picks how the rest is cut into pieces (one piece;
// pieces of 0..8 bytes; of 0..64 bytes) and seeds the cuts, byte 1 seeds the
// reads; the rest is a wire frame (varint32 header length, header, payload)
// that IncomingFrame::FromWire splits. Every piece is its own heap
// allocation, so a read past a piece is a heap-buffer-overflow. Then a
// sequence of Consume / Read / ConsumeFloats of random sizes (some past the
// end) drains the payload.
// Asserts: a refused frame's error starts with "frame:"; for an accepted one
// the length prefix (1..5 bytes), header and payload add up to the input and
// the header is the bytes after the prefix; every read hands out exactly the
// next bytes of the input, in order; a read past the end is OUT_OF_RANGE and
// consumes nothing; ConsumeFloats of a size that is not whole floats is
// INVALID_ARGUMENT and consumes nothing, otherwise it hands out aligned
// floats with contiguous element indices from 0, bit-equal to the input.
// Seeds: tests/fuzz/corpus/frame/ (every PS and key-value request of a tiny
// in-process run, recorded by tests/fuzz/record_seeds.cc, with a split byte
// in front; crash-* regression inputs).
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/transport/frame.h"
#include "tests/fuzz/fuzz_util.h"

using pstrain::IncomingFrame;
using pstrain::fuzz::SplitMix;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint8_t mode = data[0];
  SplitMix cuts(mode), reads(data[1]);
  const std::string wire(reinterpret_cast<const char*>(data) + 2, size - 2);

  auto owned = std::make_shared<std::vector<std::unique_ptr<char[]>>>();
  std::vector<IncomingFrame::Piece> pieces;
  for (size_t at = 0; at < wire.size();) {
    size_t n = wire.size() - at;
    if (mode % 3 == 1) n = std::min<size_t>(n, cuts.Next() % 9);
    if (mode % 3 == 2) n = std::min<size_t>(n, cuts.Next() % 65);
    owned->push_back(std::make_unique<char[]>(n == 0 ? 1 : n));
    if (n > 0) std::memcpy(owned->back().get(), wire.data() + at, n);
    pieces.push_back({owned->back().get(), n});
    at += n;
  }
  absl::StatusOr<IncomingFrame> parsed = IncomingFrame::FromWire(std::move(pieces), owned);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().message().substr(0, 6) == "frame:", "FromWire error does not name the frame: ",
               parsed.status().ToString());
    return 0;
  }
  IncomingFrame& frame = *parsed;
  const size_t payload = frame.payload_bytes();
  FUZZ_CHECK(frame.remaining() == payload, "a fresh frame has consumed ", payload - frame.remaining(), " bytes");
  FUZZ_CHECK(frame.header().size() + payload < wire.size(), "header ", frame.header().size(), " + payload ", payload,
             " leave no room for the length prefix in ", wire.size(), " bytes");
  const size_t prefix = wire.size() - frame.header().size() - payload;
  FUZZ_CHECK(prefix >= 1 && prefix <= 5, "length prefix of ", prefix, " bytes");
  FUZZ_CHECK(wire.compare(prefix, frame.header().size(), frame.header()) == 0,
             "header is not the bytes after the prefix");

  size_t offset = prefix + frame.header().size();  // of the next payload byte in `wire`
  for (int op = 0; op < 64 && frame.remaining() > 0; ++op) {
    const size_t before = frame.remaining();
    const size_t n = reads.Next() % (before + 2 + (op % 4 == 0 ? 64 : 0));
    const int kind = static_cast<int>(reads.Next() % 3);
    if (kind == 0) {
      std::string got;
      absl::Status s = frame.Consume(n, [&](const char* p, size_t k) { got.append(p, k); });
      if (n > before) {
        FUZZ_CHECK(absl::IsOutOfRange(s) && frame.remaining() == before && got.empty(), "Consume(", n, ") with ",
                   before, " left: ", s.ToString());
        continue;
      }
      FUZZ_CHECK(s.ok(), s.ToString());
      FUZZ_CHECK(got == wire.substr(offset, n), "Consume(", n, ") at payload offset ", offset, " handed other bytes");
    } else if (kind == 1) {
      std::string got(n, '\0');
      absl::Status s = frame.Read(got.data(), n);
      if (n > before) {
        FUZZ_CHECK(absl::IsOutOfRange(s) && frame.remaining() == before, "Read(", n, ") with ", before,
                   " left: ", s.ToString());
        continue;
      }
      FUZZ_CHECK(s.ok(), s.ToString());
      FUZZ_CHECK(got == wire.substr(offset, n), "Read(", n, ") at payload offset ", offset, " read other bytes");
    } else {
      size_t expect_next = 0;
      std::string got;
      absl::Status s = frame.ConsumeFloats(n, [&](size_t first, const float* f, size_t count) {
        FUZZ_CHECK(first == expect_next, "ConsumeFloats handed element ", first, ", expected ", expect_next);
        FUZZ_CHECK(reinterpret_cast<uintptr_t>(f) % alignof(float) == 0, "misaligned floats");
        FUZZ_CHECK(count > 0, "ConsumeFloats handed an empty run");
        got.append(reinterpret_cast<const char*>(f), count * sizeof(float));
        expect_next += count;
      });
      if (n % sizeof(float) != 0) {
        FUZZ_CHECK(absl::IsInvalidArgument(s) && frame.remaining() == before && got.empty(), "ConsumeFloats(", n,
                   "): ", s.ToString());
        continue;
      }
      if (n > before) {
        FUZZ_CHECK(absl::IsOutOfRange(s) && frame.remaining() == before && got.empty(), "ConsumeFloats(", n, ") with ",
                   before, " left: ", s.ToString());
        continue;
      }
      FUZZ_CHECK(s.ok(), s.ToString());
      FUZZ_CHECK(expect_next == n / sizeof(float), "ConsumeFloats(", n, ") handed ", expect_next, " floats");
      FUZZ_CHECK(got == wire.substr(offset, n), "ConsumeFloats(", n, ") at payload offset ", offset,
                 " handed other bytes");
    }
    FUZZ_CHECK(frame.remaining() == before - n, "consumed ", before - frame.remaining(), " bytes, asked ", n);
    offset += n;
  }
  return 0;
}
