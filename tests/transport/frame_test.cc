// IncomingFrame / OutgoingFrame: wire parsing and payload reading across
// arbitrary piece boundaries (common/transport/frame.h).
#include "common/transport/frame.h"

#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;

// Splits `bytes` into pieces of the given sizes (the last piece takes the
// rest; sizes past the end are ignored).
std::vector<IncomingFrame::Piece> Split(const std::string& bytes, const std::vector<size_t>& sizes) {
  std::vector<IncomingFrame::Piece> pieces;
  size_t at = 0;
  for (size_t s : sizes) {
    if (at >= bytes.size()) break;
    size_t take = std::min(s, bytes.size() - at);
    pieces.push_back({bytes.data() + at, take});
    at += take;
  }
  if (at < bytes.size()) pieces.push_back({bytes.data() + at, bytes.size() - at});
  return pieces;
}

std::vector<IncomingFrame::Piece> SplitEvery(const std::string& bytes, size_t size) {
  return Split(bytes, std::vector<size_t>(bytes.size() / size + 1, size));
}

std::string Pattern(size_t n, uint32_t seed = 1) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string ReadAll(IncomingFrame& frame) {
  std::string out(frame.remaining(), '\0');
  absl::Status s = frame.Read(out.data(), out.size());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// ---------------------------------------------------------------- FromWire

TEST(FrameFromWireTest, EncodeWireHeaderUsesVarintPrefix) {
  EXPECT_EQ(EncodeWireHeader(""), std::string(1, '\0'));
  EXPECT_EQ(EncodeWireHeader("abc"), std::string("\x03") + "abc");
  std::string h127(127, 'x');
  EXPECT_EQ(EncodeWireHeader(h127), std::string("\x7f") + h127);
  std::string h128(128, 'y');
  EXPECT_EQ(EncodeWireHeader(h128), std::string("\x80\x01") + h128);
  std::string h300(300, 'z');
  EXPECT_EQ(EncodeWireHeader(h300), std::string("\xac\x02") + h300);
}

TEST(FrameFromWireTest, SinglePiece) {
  const std::string header = "header-bytes";
  const std::string payload = Pattern(100);
  const std::string wire = EncodeWireHeader(header) + payload;
  auto frame = IncomingFrame::FromWire({{wire.data(), wire.size()}}, nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), header);
  EXPECT_EQ(frame->payload_bytes(), payload.size());
  EXPECT_EQ(frame->remaining(), payload.size());
  EXPECT_EQ(ReadAll(*frame), payload);
  EXPECT_EQ(frame->remaining(), 0u);
}

TEST(FrameFromWireTest, EmptyHeaderAndEmptyPayload) {
  const std::string wire = EncodeWireHeader("");
  auto frame = IncomingFrame::FromWire({{wire.data(), wire.size()}}, nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), "");
  EXPECT_EQ(frame->payload_bytes(), 0u);
}

TEST(FrameFromWireTest, HeaderOnlyNoPayload) {
  const std::string wire = EncodeWireHeader("only a header");
  auto frame = IncomingFrame::FromWire(SplitEvery(wire, 3), nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), "only a header");
  EXPECT_EQ(frame->payload_bytes(), 0u);
  EXPECT_EQ(frame->remaining(), 0u);
}

// Every two-piece split of a small frame, including splits inside the varint,
// inside the header and exactly at the header/payload boundary.
TEST(FrameFromWireTest, EveryTwoPieceSplit) {
  const std::string header = Pattern(200, 7);  // 2-byte varint
  const std::string payload = Pattern(37, 8);
  const std::string wire = EncodeWireHeader(header) + payload;
  for (size_t cut = 1; cut < wire.size(); ++cut) {
    SCOPED_TRACE(cut);
    auto frame = IncomingFrame::FromWire(Split(wire, {cut}), nullptr);
    ASSERT_TRUE(frame.ok()) << frame.status();
    EXPECT_EQ(frame->header(), header);
    EXPECT_EQ(frame->payload_bytes(), payload.size());
    EXPECT_EQ(ReadAll(*frame), payload);
  }
}

TEST(FrameFromWireTest, OneBytePieces) {
  const std::string header = Pattern(300, 3);
  const std::string payload = Pattern(64, 4);
  const std::string wire = EncodeWireHeader(header) + payload;
  auto frame = IncomingFrame::FromWire(SplitEvery(wire, 1), nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), header);
  EXPECT_EQ(frame->payload_bytes(), payload.size());
  EXPECT_EQ(ReadAll(*frame), payload);
}

TEST(FrameFromWireTest, LargeHeaderWithThreeByteVarint) {
  const std::string header = Pattern(70000, 5);  // 70000 >= 2^14: 3-byte varint
  const std::string payload = Pattern(1000, 6);
  const std::string prefix = EncodeWireHeader(header);
  ASSERT_EQ(prefix.size(), header.size() + 3);
  const std::string wire = prefix + payload;
  // Split inside the varint, inside the header twice, and inside the payload.
  auto frame = IncomingFrame::FromWire(Split(wire, {2, 40000, 30000, 500}), nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), header);
  EXPECT_EQ(frame->payload_bytes(), payload.size());
  EXPECT_EQ(ReadAll(*frame), payload);
}

TEST(FrameFromWireTest, ParsesProtoHeader) {
  PushRequest request;
  request.set_worker(3);
  request.set_step(41);
  TensorHeader* t = request.add_tensors();
  t->set_name(std::string(200, 'n'));  // header > 127 bytes
  t->add_shape(2);
  t->add_shape(3);
  t->set_num_bytes(24);
  OutgoingFrame out = OutgoingFrame::FromHeader(request);
  ASSERT_GT(out.header.size(), 127u);
  const std::string payload = Pattern(24);
  const std::string wire = EncodeWireHeader(out.header) + payload;
  auto frame = IncomingFrame::FromWire(Split(wire, {1, 100, 7}), nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  PushRequest parsed;
  ASSERT_TRUE(frame->ParseHeader(&parsed));
  EXPECT_EQ(parsed.worker(), 3);
  EXPECT_EQ(parsed.step(), 41);
  ASSERT_EQ(parsed.tensors_size(), 1);
  EXPECT_EQ(parsed.tensors(0).name(), std::string(200, 'n'));
  EXPECT_EQ(ReadAll(*frame), payload);
}

TEST(FrameFromWireTest, NoBytesIsError) {
  auto frame = IncomingFrame::FromWire({}, nullptr);
  EXPECT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameFromWireTest, TruncatedVarintIsError) {
  const std::string wire = "\x80";  // continuation bit set, nothing follows
  auto frame = IncomingFrame::FromWire({{wire.data(), wire.size()}}, nullptr);
  EXPECT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameFromWireTest, TruncatedHeaderIsError) {
  const std::string header = Pattern(10);
  const std::string wire = EncodeWireHeader(header).substr(0, 6);  // 5 of 10 header bytes
  auto frame = IncomingFrame::FromWire(Split(wire, {2, 2}), nullptr);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(frame.status().message()), HasSubstr("10"));
}

TEST(FrameFromWireTest, TruncatedLongHeaderIsError) {
  const std::string header = Pattern(300);
  std::string wire = EncodeWireHeader(header);
  wire.resize(wire.size() - 1);
  auto frame = IncomingFrame::FromWire(SplitEvery(wire, 50), nullptr);
  ASSERT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameFromWireTest, OverlongVarintIsError) {
  const std::string wire = std::string(6, '\xff') + std::string(16, 'a');
  auto frame = IncomingFrame::FromWire({{wire.data(), wire.size()}}, nullptr);
  EXPECT_FALSE(frame.ok());
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameFromWireTest, KeepaliveIsHeldByTheFrame) {
  auto bytes = std::make_shared<std::string>(EncodeWireHeader("h") + "payload");
  std::weak_ptr<std::string> weak = bytes;
  absl::StatusOr<IncomingFrame> frame =
      IncomingFrame::FromWire({{bytes->data(), bytes->size()}}, std::shared_ptr<const void>(bytes));
  bytes.reset();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(ReadAll(*frame), "payload");
  frame = absl::InternalError("drop it");
  EXPECT_TRUE(weak.expired());
}

// ---------------------------------------------------------------- Consume / Read

IncomingFrame FrameOf(const std::string& payload, const std::vector<size_t>& sizes) {
  return IncomingFrame("hdr", Split(payload, sizes), nullptr);
}

TEST(FrameConsumeTest, ReadAcrossPieceBoundaries) {
  const std::string payload = "abcdefgh";
  IncomingFrame frame = FrameOf(payload, {3, 4, 1});
  EXPECT_EQ(frame.payload_bytes(), 8u);
  char buf[8] = {};
  ASSERT_TRUE(frame.Read(buf, 2).ok());
  EXPECT_EQ(std::string(buf, 2), "ab");
  EXPECT_EQ(frame.remaining(), 6u);
  ASSERT_TRUE(frame.Read(buf, 3).ok());  // c | de
  EXPECT_EQ(std::string(buf, 3), "cde");
  std::vector<std::string> runs;
  ASSERT_TRUE(frame.Consume(3, [&](const char* d, size_t n) { runs.emplace_back(d, n); }).ok());  // fg | h
  std::string joined;
  for (const std::string& r : runs) {
    EXPECT_FALSE(r.empty());
    joined += r;
  }
  EXPECT_EQ(joined, "fgh");
  EXPECT_EQ(runs.size(), 2u);  // one call per contiguous piece
  EXPECT_EQ(frame.remaining(), 0u);
  // Consuming zero bytes at the end is fine.
  EXPECT_TRUE(frame.Consume(0, [](const char*, size_t) {}).ok());
}

TEST(FrameConsumeTest, ConsumeHandsOutPiecesWithoutCopying) {
  const std::string payload = Pattern(100);
  IncomingFrame frame = FrameOf(payload, {10, 50});
  std::vector<const char*> starts;
  ASSERT_TRUE(frame.Consume(100, [&](const char* d, size_t n) { starts.push_back(d); }).ok());
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0], payload.data());
  EXPECT_EQ(starts[1], payload.data() + 10);
  EXPECT_EQ(starts[2], payload.data() + 60);
}

TEST(FrameConsumeTest, ConsumeBeyondPayloadIsOutOfRangeAndConsumesNothing) {
  const std::string payload = "0123456789";
  IncomingFrame frame = FrameOf(payload, {4, 4});
  char buf[4];
  ASSERT_TRUE(frame.Read(buf, 3).ok());
  bool called = false;
  absl::Status s = frame.Consume(8, [&](const char*, size_t) { called = true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_FALSE(called);
  EXPECT_EQ(frame.remaining(), 7u);
  s = frame.Read(buf, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_EQ(frame.remaining(), 7u);
  // The rest is still intact.
  EXPECT_EQ(ReadAll(frame), "3456789");
  EXPECT_EQ(frame.Consume(1, [&](const char*, size_t) { called = true; }).code(), absl::StatusCode::kOutOfRange);
  EXPECT_FALSE(called);
}

TEST(FrameConsumeTest, ZeroLengthPiecesAreSkipped) {
  const std::string payload = "abcdef";
  IncomingFrame frame("h", {{payload.data(), 2}, {payload.data() + 2, 0}, {payload.data() + 2, 4}}, nullptr);
  EXPECT_EQ(frame.payload_bytes(), 6u);
  EXPECT_EQ(ReadAll(frame), "abcdef");
}

TEST(FrameConsumeTest, FromOutgoingViewsChunksAndKeepsOwnersAlive) {
  auto a = std::make_shared<std::string>("hello ");
  auto b = std::make_shared<std::string>("world");
  std::weak_ptr<std::string> wa = a, wb = b;
  OutgoingFrame out;
  out.header = "the header";
  out.chunks.push_back({a->data(), a->size(), a});
  out.chunks.push_back({nullptr, 0, nullptr});
  out.chunks.push_back({b->data(), b->size(), b});
  EXPECT_EQ(out.payload_bytes(), 11u);
  const char* a_data = a->data();
  a.reset();
  b.reset();
  {
    IncomingFrame in = IncomingFrame::FromOutgoing(std::move(out));
    EXPECT_EQ(in.header(), "the header");
    EXPECT_EQ(in.payload_bytes(), 11u);
    EXPECT_FALSE(wa.expired());
    EXPECT_FALSE(wb.expired());
    const char* first = nullptr;
    ASSERT_TRUE(in.Consume(6, [&](const char* d, size_t) {
                    if (first == nullptr) first = d;
                  }).ok());
    EXPECT_EQ(first, a_data);  // no copy
    EXPECT_EQ(ReadAll(in), "world");
  }
  EXPECT_TRUE(wa.expired());
  EXPECT_TRUE(wb.expired());
}

// ---------------------------------------------------------------- ConsumeFloats

struct FloatRun {
  size_t first;
  size_t count;
};

// Serialises `values` at byte offset `misalign` of a buffer, so every piece
// boundary and the start address can be placed anywhere.
struct FloatBytes {
  std::vector<char> storage;
  const char* data;
  size_t size;
};

FloatBytes MakeFloatBytes(const std::vector<float>& values, size_t misalign) {
  FloatBytes fb;
  fb.storage.resize(values.size() * sizeof(float) + misalign + 16);
  // Align the base to 16 so `misalign` is the real misalignment.
  char* base = fb.storage.data();
  base += (16 - reinterpret_cast<uintptr_t>(base) % 16) % 16;
  std::memcpy(base + misalign, values.data(), values.size() * sizeof(float));
  fb.data = base + misalign;
  fb.size = values.size() * sizeof(float);
  return fb;
}

std::vector<float> TestFloats(size_t n) {
  std::vector<float> v(n);
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<IncomingFrame::Piece> SplitRaw(const char* data, size_t size, const std::vector<size_t>& sizes,
                                           bool repeat) {
  std::vector<IncomingFrame::Piece> pieces;
  size_t at = 0, i = 0;
  while (at < size) {
    if (!repeat && i >= sizes.size()) {
      pieces.push_back({data + at, size - at});
      break;
    }
    size_t take = std::min(sizes[i % sizes.size()], size - at);
    pieces.push_back({data + at, take});
    at += take;
    ++i;
  }
  return pieces;
}

// Consumes all floats of `frame` and checks element indices are contiguous
// and every run is aligned.
std::vector<float> CollectFloats(IncomingFrame& frame, size_t n_bytes, std::vector<FloatRun>* runs = nullptr,
                                 size_t expect_first = 0) {
  std::vector<float> out;
  size_t next = expect_first;
  absl::Status s = frame.ConsumeFloats(n_bytes, [&](size_t first, const float* data, size_t count) {
    EXPECT_EQ(first, next) << "runs must cover consecutive element indices";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % alignof(float), 0u) << "run not aligned";
    EXPECT_GT(count, 0u);
    out.insert(out.end(), data, data + count);
    next = first + count;
    if (runs != nullptr) runs->push_back({first, count});
  });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectBitEqual(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

struct SplitCase {
  const char* name;
  size_t misalign;
  std::vector<size_t> sizes;
  bool repeat;
};

void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }

class ConsumeFloatsSplitTest : public ::testing::TestWithParam<SplitCase> {};

TEST_P(ConsumeFloatsSplitTest, YieldsOriginalFloatsWithIndices) {
  const SplitCase& c = GetParam();
  const std::vector<float> values = TestFloats(3000);  // > the 1024-float scratch
  FloatBytes fb = MakeFloatBytes(values, c.misalign);
  IncomingFrame frame("h", SplitRaw(fb.data, fb.size, c.sizes, c.repeat), nullptr);
  ASSERT_EQ(frame.payload_bytes(), fb.size);
  std::vector<float> got = CollectFloats(frame, fb.size);
  ExpectBitEqual(got, values);
  EXPECT_EQ(frame.remaining(), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Splits, ConsumeFloatsSplitTest,
    ::testing::Values(SplitCase{"AlignedOnePiece", 0, {}, false}, SplitCase{"MisalignedOnePiece1", 1, {}, false},
                      SplitCase{"MisalignedOnePiece2", 2, {}, false}, SplitCase{"MisalignedOnePiece3", 3, {}, false},
                      SplitCase{"AlignedSplitMidFloat", 0, {6, 4097, 3}, false},
                      SplitCase{"MisalignedSplitMidFloat", 1, {5, 4, 4095, 2}, false},
                      SplitCase{"TwoBytePieces", 0, {2}, true}, SplitCase{"ThreeBytePieces", 1, {3}, true},
                      SplitCase{"FiveBytePieces", 3, {5}, true}, SplitCase{"OneBytePieces", 0, {1}, true},
                      SplitCase{"FloatOverThreePieces", 0, {2, 1, 1}, true},
                      SplitCase{"FloatOverThreePiecesOnce", 0, {2, 1, 1}, false},
                      SplitCase{"MixedSmallAndLarge", 2, {1, 1, 1, 1, 7, 1, 2, 1000, 3, 1, 1}, true}),
    [](const ::testing::TestParamInfo<SplitCase>& info) { return std::string(info.param.name); });

TEST(ConsumeFloatsTest, RandomSplits) {
  const std::vector<float> values = TestFloats(2500);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 50; ++trial) {
    SCOPED_TRACE(trial);
    FloatBytes fb = MakeFloatBytes(values, trial % 4);
    std::vector<size_t> sizes;
    std::uniform_int_distribution<size_t> small(1, 9), large(1, 5000);
    for (size_t total = 0; total < fb.size;) {
      size_t s = (rng() % 3 == 0) ? large(rng) : small(rng);
      sizes.push_back(s);
      total += s;
    }
    IncomingFrame frame("h", SplitRaw(fb.data, fb.size, sizes, false), nullptr);
    ExpectBitEqual(CollectFloats(frame, fb.size), values);
  }
}

TEST(ConsumeFloatsTest, AlignedPieceIsHandedOutWithoutCopy) {
  const std::vector<float> values = TestFloats(100);
  FloatBytes fb = MakeFloatBytes(values, 0);
  IncomingFrame frame("h", {{fb.data, fb.size}}, nullptr);
  std::vector<const float*> ptrs;
  ASSERT_TRUE(frame.ConsumeFloats(fb.size, [&](size_t, const float* d, size_t) { ptrs.push_back(d); }).ok());
  ASSERT_EQ(ptrs.size(), 1u);
  EXPECT_EQ(static_cast<const void*>(ptrs[0]), static_cast<const void*>(fb.data));
}

TEST(ConsumeFloatsTest, ConsumesOnlyTheRequestedBytes) {
  const std::vector<float> values = TestFloats(10);
  FloatBytes fb = MakeFloatBytes(values, 0);
  // A 1-byte prefix makes the floats misaligned in the frame.
  std::string bytes = "X" + std::string(fb.data, fb.size) + "tail";
  IncomingFrame frame("h", SplitRaw(bytes.data(), bytes.size(), {3, 6, 9}, true), nullptr);
  char x;
  ASSERT_TRUE(frame.Read(&x, 1).ok());
  EXPECT_EQ(x, 'X');
  // First 4 floats, then the next 6, each run indexed from 0 of its call.
  std::vector<float> first = CollectFloats(frame, 16);
  ExpectBitEqual(first, std::vector<float>(values.begin(), values.begin() + 4));
  std::vector<float> second = CollectFloats(frame, 24);
  ExpectBitEqual(second, std::vector<float>(values.begin() + 4, values.end()));
  EXPECT_EQ(ReadAll(frame), "tail");
}

TEST(ConsumeFloatsTest, NotWholeFloatsIsError) {
  const std::string payload(16, 'a');
  IncomingFrame frame = FrameOf(payload, {});
  bool called = false;
  absl::Status s = frame.ConsumeFloats(6, [&](size_t, const float*, size_t) { called = true; });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(called);
  EXPECT_EQ(frame.remaining(), 16u);
}

TEST(ConsumeFloatsTest, BeyondPayloadIsOutOfRangeAndConsumesNothing) {
  const std::vector<float> values = TestFloats(4);
  FloatBytes fb = MakeFloatBytes(values, 1);
  IncomingFrame frame("h", SplitRaw(fb.data, fb.size, {5}, true), nullptr);
  bool called = false;
  absl::Status s = frame.ConsumeFloats(20, [&](size_t, const float*, size_t) { called = true; });
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;
  EXPECT_FALSE(called);
  EXPECT_EQ(frame.remaining(), 16u);
  ExpectBitEqual(CollectFloats(frame, 16), values);
}

}  // namespace
}  // namespace pstrain
