// The pieces of the grpc transport's shared-memory path
// (common/transport/grpc/): SharedSegment, the ShmDescriptor and ShmOffer
// texts, ShmRing and ShmRingReader over one segment (reuse, fullness,
// withdrawal, stale and malformed descriptors, a writer and a reader
// thread), and a pair of ShmLanes in one process.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/transport/frame.h"
#include "common/transport/grpc/shm_lane.h"
#include "common/transport/grpc/shm_ring.h"
#include "common/transport/grpc/shm_segment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr size_t kSizeMax = std::numeric_limits<size_t>::max();

// Byte `i` of block `seq`'s payload: neighbouring blocks, and a block that
// reuses another's place, differ in every byte.
char PatternByte(uint64_t seq, size_t i) { return static_cast<char>((seq * 0x9e3779b1u + i * 131 + (i >> 8)) & 0xff); }

void Fill(char* payload, const ShmDescriptor& d) {
  for (size_t i = 0; i < d.bytes; ++i) payload[i] = PatternByte(d.seq, i);
}

// The index of the first byte of `payload` that is not block d's, or -1.
int64_t FirstWrongByte(const char* payload, const ShmDescriptor& d) {
  for (size_t i = 0; i < d.bytes; ++i) {
    if (payload[i] != PatternByte(d.seq, i)) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string Pattern(size_t bytes, uint64_t seed) {
  std::string s(bytes, '\0');
  Fill(s.data(), ShmDescriptor{0, bytes, seed});
  return s;
}

// One past the last byte of the block `d` names, counted from the start of
// the area: a block occupies max(bytes, 1) rounded up to kShmBlockAlignment.
uint64_t End(const ShmDescriptor& d) {
  const uint64_t bytes = std::max<uint64_t>(d.bytes, 1);
  return d.offset + (bytes + kShmBlockAlignment - 1) / kShmBlockAlignment * kShmBlockAlignment;
}

bool Overlap(const ShmDescriptor& a, const ShmDescriptor& b) { return a.offset < End(b) && b.offset < End(a); }

std::unique_ptr<SharedSegment> MakeSegment(size_t bytes) {
  absl::StatusOr<std::unique_ptr<SharedSegment>> segment = SharedSegment::Create(bytes);
  EXPECT_TRUE(segment.ok()) << segment.status();
  return segment.ok() ? *std::move(segment) : nullptr;
}

// ---------------------------------------------------------------- SharedSegment

TEST(SharedSegmentTest, OpenMapsTheCreatorsBytes) {
  constexpr size_t kBytes = 64 * 1024;
  std::unique_ptr<SharedSegment> created = MakeSegment(kBytes);
  ASSERT_NE(created, nullptr);
  EXPECT_EQ(created->size(), kBytes);
  EXPECT_THAT(created->name(), StartsWith("/"));
  std::unique_ptr<SharedSegment> another = MakeSegment(kBytes);
  ASSERT_NE(another, nullptr);
  EXPECT_NE(another->name(), created->name());

  ASSERT_TRUE(created->Commit(0, kBytes).ok());
  const ShmDescriptor whole{0, kBytes, 7};
  Fill(created->data(), whole);
  absl::StatusOr<std::unique_ptr<SharedSegment>> opened = SharedSegment::Open(created->name(), kBytes);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->name(), created->name());
  EXPECT_EQ((*opened)->size(), kBytes);
  EXPECT_NE((*opened)->data(), created->data());  // a mapping of its own
  EXPECT_EQ(FirstWrongByte((*opened)->data(), whole), -1);
  (*opened)->data()[kBytes - 1] = static_cast<char>(~created->data()[kBytes - 1]);
  EXPECT_EQ(created->data()[kBytes - 1], (*opened)->data()[kBytes - 1]);  // and writes go both ways
}

TEST(SharedSegmentTest, OpenWithAnotherSizeIsFailedPrecondition) {
  std::unique_ptr<SharedSegment> created = MakeSegment(8192);
  ASSERT_NE(created, nullptr);
  for (size_t bytes : {size_t{4096}, size_t{8193}, size_t{0}}) {
    absl::StatusOr<std::unique_ptr<SharedSegment>> opened = SharedSegment::Open(created->name(), bytes);
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition) << bytes << ": " << opened.status();
    EXPECT_THAT(opened.status().message(), HasSubstr(absl::StrCat("not ", bytes, " bytes")));
  }
  EXPECT_TRUE(SharedSegment::Open(created->name(), 8192).ok());
}

TEST(SharedSegmentTest, UnlinkedNameCannotBeOpened) {
  std::unique_ptr<SharedSegment> created = MakeSegment(4096);
  ASSERT_NE(created, nullptr);
  const std::string name = created->name();
  created->data()[0] = 'a';
  created->Unlink();
  created->Unlink();  // a second time is harmless
  absl::StatusOr<std::unique_ptr<SharedSegment>> opened = SharedSegment::Open(name, 4096);
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kFailedPrecondition) << opened.status();
  EXPECT_EQ(created->data()[0], 'a');  // the mapping outlives the name
}

TEST(SharedSegmentTest, OnlyTheCreatorRemovesTheName) {
  std::string name;
  {
    std::unique_ptr<SharedSegment> created = MakeSegment(4096);
    ASSERT_NE(created, nullptr);
    name = created->name();
    absl::StatusOr<std::unique_ptr<SharedSegment>> opened = SharedSegment::Open(name, 4096);
    ASSERT_TRUE(opened.ok()) << opened.status();
    opened->reset();
    EXPECT_TRUE(SharedSegment::Open(name, 4096).ok()) << "the opener's going removed the name";
  }
  EXPECT_FALSE(SharedSegment::Open(name, 4096).ok()) << "the creator's going left " << name;
}

TEST(SharedSegmentTest, OpenRefusesNamesThatAreNotSegmentNames) {
  for (const char* name : {"", "/", "pstrain-x", "/dir/pstrain-x", "/pstrain-x/", "//pstrain-x"}) {
    absl::StatusOr<std::unique_ptr<SharedSegment>> opened = SharedSegment::Open(name, 4096);
    EXPECT_EQ(opened.status().code(), absl::StatusCode::kInvalidArgument) << "'" << name << "': " << opened.status();
    EXPECT_THAT(opened.status().message(), HasSubstr("is not a segment name"));
  }
}

TEST(SharedSegmentTest, CommitPastTheEndIsOutOfRange) {
  std::unique_ptr<SharedSegment> segment = MakeSegment(8192);
  ASSERT_NE(segment, nullptr);
  EXPECT_TRUE(segment->Commit(0, 8192).ok());
  EXPECT_TRUE(segment->Commit(4096, 4096).ok());
  const std::vector<std::pair<size_t, size_t>> past = {{0, 8193},    {8192, 1},     {8193, 0},
                                                       {4097, 4096}, {1, kSizeMax}, {kSizeMax, 2}};
  for (const auto& [offset, bytes] : past) {
    const absl::Status status = segment->Commit(offset, bytes);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << offset << "+" << bytes << ": " << status;
  }
}

// ---------------------------------------------------------------- descriptor and offer texts

TEST(ShmDescriptorTest, EncodeParseRoundTrip) {
  EXPECT_EQ((ShmDescriptor{4096, 100, 7}.Encode()), "4096,100,7");
  for (const ShmDescriptor& d :
       {ShmDescriptor{0, 0, 1}, ShmDescriptor{4096, 1 << 20, 42}, ShmDescriptor{kU64Max, kU64Max, (1ull << 62) - 1}}) {
    const std::string text = d.Encode();
    absl::StatusOr<ShmDescriptor> parsed = ShmDescriptor::Parse(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(parsed->offset, d.offset) << text;
    EXPECT_EQ(parsed->bytes, d.bytes) << text;
    EXPECT_EQ(parsed->seq, d.seq) << text;
  }
}

TEST(ShmDescriptorTest, MalformedTextIsInvalidArgumentSayingWhy) {
  const std::string kFormat = "is not <offset>,<bytes>,<seq>";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", kFormat},
      {"1,2", "'1,2' " + kFormat},
      {"1,2,3,4", "'1,2,3,4' " + kFormat},
      {"1,,3", kFormat},
      {"x,2,3", "'x,2,3' " + kFormat},
      {"1,2,3x", kFormat},
      {"-64,2,3", kFormat},
      {"1,18446744073709551616,3", kFormat},  // 2^64
      {"1,2,0", "sequence 0 out of range"},
      {"1,2,4611686018427387904", "sequence 4611686018427387904 out of range"},  // 2^62
  };
  for (const auto& [text, says] : cases) {
    absl::StatusOr<ShmDescriptor> parsed = ShmDescriptor::Parse(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "': " << parsed.status();
    EXPECT_THAT(parsed.status().message(), HasSubstr(says)) << text;
  }
  // A long text is not echoed whole.
  absl::StatusOr<ShmDescriptor> long_text = ShmDescriptor::Parse(std::string(100000, '7'));
  EXPECT_EQ(long_text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(long_text.status().message().size(), 256u);
}

TEST(ShmOfferTest, EncodeParseRoundTrip) {
  EXPECT_FALSE(SharedMemoryHostIdentity().empty());
  for (const ShmOffer& offer : {ShmOffer{"/pstrain-12-3-abc", 1 << 20, SharedMemoryHostIdentity(), 4321},
                                ShmOffer{"/x", 8192, "h", -1}, ShmOffer{"/y", uint64_t{1} << 36, "", 0}}) {
    const std::string text = offer.Encode();
    absl::StatusOr<ShmOffer> parsed = ShmOffer::Parse(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_EQ(parsed->name, offer.name) << text;
    EXPECT_EQ(parsed->half_bytes, offer.half_bytes) << text;
    EXPECT_EQ(parsed->host, offer.host) << text;
    EXPECT_EQ(parsed->pid, offer.pid) << text;
  }
}

TEST(ShmOfferTest, MalformedTextIsInvalidArgumentSayingWhy) {
  const std::string kFormat = "is not <name>|<half bytes>|<host>|<pid>";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", kFormat},
      {"/n|64|h", "'/n|64|h' " + kFormat},
      {"/n|64|h|1|2", kFormat},
      {"/n|x|h|1", kFormat},
      {"/n|64|h|p", kFormat},
      {"/n|-64|h|1", kFormat},
      {"/n|64|h|9223372036854775808", kFormat},  // 2^63
      {"/n|100|h|1", "half of 100 bytes"},
      {"/n|0|h|1", "half of 0 bytes"},
      {"/n|64|h|1", "half of 64 bytes"},
      {"/n|4096|h|1", "half of 4096 bytes"},  // a table and no room for a block
      {"/n|8200|h|1", "half of 8200 bytes"},  // not a multiple of 4096
      {"/n|12289|h|1", "half of 12289 bytes"},
      {"/n|68719476800|h|1", "half of 68719476800 bytes"},  // 2^36 + 64
      {"/n|68719480832|h|1", "half of 68719480832 bytes"},  // 2^36 + 4096
      {"/n|137438953472|h|1", "half of 137438953472 bytes"},
  };
  for (const auto& [text, says] : cases) {
    absl::StatusOr<ShmOffer> parsed = ShmOffer::Parse(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << "'" << text << "': " << parsed.status();
    EXPECT_THAT(parsed.status().message(), HasSubstr(says)) << text;
  }
}

// ---------------------------------------------------------------- ShmRing and ShmRingReader

TEST(ShmRegionLayoutTest, TableComesFirstAndBlocksFillTheRest) {
  for (uint64_t pages : {2, 3, 16, 64, 256, 257, 1024}) {
    const uint64_t region = pages * kShmBlockAlignment;
    const ShmRegionLayout layout(region);
    const uint64_t places = region / kShmBlockAlignment;
    EXPECT_GE(layout.table_bytes, 16 * places) << pages << " pages: a state slot for every block start";
    EXPECT_LT(layout.table_bytes, 16 * places + kShmBlockAlignment) << pages << " pages";
    EXPECT_EQ(layout.table_bytes % kShmBlockAlignment, 0u) << pages << " pages";
    EXPECT_EQ(layout.area_bytes, region - layout.table_bytes) << pages << " pages";
    EXPECT_EQ(layout.area_bytes % kShmBlockAlignment, 0u) << pages << " pages";
  }
  EXPECT_EQ(ShmRegionLayout(16 * kShmBlockAlignment).area_bytes, 15 * kShmBlockAlignment);
  EXPECT_EQ(ShmRegionLayout(257 * kShmBlockAlignment).table_bytes, 2 * kShmBlockAlignment);
}

// A writer's ring over [0, region) of a segment and a reader over the same bytes.
class ShmRingTest : public ::testing::Test {
 protected:
  static constexpr size_t kRegion = 16 * kShmBlockAlignment;

  void SetUp() override { Build(absl::InfiniteDuration()); }

  void Build(absl::Duration withdraw_after) {
    ring_.reset();
    segment_ = MakeSegment(kRegion);
    ASSERT_NE(segment_, nullptr);
    segment_->Unlink();
    ring_ = std::make_unique<ShmRing>(segment_.get(), 0, kRegion, withdraw_after);
    reader_ = std::make_unique<ShmRingReader>(segment_->data(), kRegion);
    area_ = segment_->data() + layout_.table_bytes;
  }

  // A new block of `bytes`, filled with its pattern; nullopt when refused.
  std::optional<ShmDescriptor> Write(size_t bytes) {
    std::optional<ShmRing::Block> block = ring_->Allocate(bytes);
    if (!block.has_value()) return std::nullopt;
    const ShmDescriptor& d = block->descriptor;
    EXPECT_EQ(d.bytes, bytes);
    EXPECT_EQ(d.offset % kShmBlockAlignment, 0u) << d.Encode();
    EXPECT_LE(End(d), area_bytes_) << d.Encode();
    EXPECT_EQ(block->payload, area_ + d.offset) << d.Encode();
    Fill(block->payload, d);
    return d;
  }

  // Takes block `d`, checks it holds its pattern, and frees it.
  void ReadAndFree(const ShmDescriptor& d) {
    absl::StatusOr<const char*> payload = reader_->Take(d);
    ASSERT_TRUE(payload.ok()) << d.Encode() << ": " << payload.status();
    EXPECT_EQ(*payload, area_ + d.offset) << d.Encode();
    EXPECT_EQ(FirstWrongByte(*payload, d), -1) << d.Encode();
    reader_->Free(d);
  }

  absl::StatusCode TakeCode(const ShmDescriptor& d) { return reader_->Take(d).status().code(); }

  const ShmRegionLayout layout_{kRegion};
  const uint64_t area_bytes_ = layout_.area_bytes;  // for blocks: the largest payload
  std::unique_ptr<SharedSegment> segment_;
  std::unique_ptr<ShmRing> ring_;
  std::unique_ptr<ShmRingReader> reader_;
  char* area_ = nullptr;
};

TEST_F(ShmRingTest, BlocksReadBackWithTheirBytes) {
  std::vector<ShmDescriptor> written;
  for (size_t bytes : {0, 1, 4095, 4096, 4097, 10000}) {
    std::optional<ShmDescriptor> d = Write(bytes);
    ASSERT_TRUE(d.has_value()) << bytes;
    for (const ShmDescriptor& w : written) EXPECT_FALSE(Overlap(w, *d)) << w.Encode() << " and " << d->Encode();
    if (!written.empty()) {
      EXPECT_GT(d->seq, written.back().seq);
    }
    written.push_back(*d);
  }
  for (const ShmDescriptor& d : written) ReadAndFree(d);
}

TEST_F(ShmRingTest, ReusesFreedSpaceWithoutOverlap) {
  std::deque<ShmDescriptor> live;
  uint64_t allocated = 0;
  for (int i = 0; i < 400; ++i) {
    const size_t bytes = 1 + (i * 6151) % 20000;
    std::optional<ShmDescriptor> d;
    while (!(d = Write(bytes)).has_value()) {
      ASSERT_FALSE(live.empty()) << "an empty ring refused " << bytes << " bytes";
      ASSERT_NO_FATAL_FAILURE(ReadAndFree(live.front()));  // checks it was not overwritten
      live.pop_front();
    }
    for (const ShmDescriptor& other : live) {
      ASSERT_FALSE(Overlap(other, *d)) << "block " << i << " " << d->Encode() << " overlaps live " << other.Encode();
    }
    live.push_back(*d);
    allocated += End(*d) - d->offset;
  }
  EXPECT_GT(allocated, 20 * area_bytes_);
  for (const ShmDescriptor& d : live) ReadAndFree(d);
}

TEST_F(ShmRingTest, FullRingRefusesThenRecoversAfterAFree) {
  std::vector<ShmDescriptor> live;
  while (std::optional<ShmDescriptor> d = Write(10000)) {  // three blocks' worth each
    live.push_back(*d);
    ASSERT_LT(live.size(), 10u) << "a 15-page area took ten 3-page blocks";
  }
  EXPECT_EQ(live.size(), area_bytes_ / (3 * kShmBlockAlignment));
  EXPECT_FALSE(ring_->Allocate(10000).has_value()) << "still full";
  EXPECT_FALSE(ring_->Allocate(0).has_value()) << "still full";
  ReadAndFree(live[0]);
  std::optional<ShmDescriptor> again = Write(10000);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->offset, live[0].offset);
  for (size_t i = 1; i < live.size(); ++i) {
    EXPECT_FALSE(Overlap(live[i], *again)) << live[i].Encode() << " and " << again->Encode();
    ReadAndFree(live[i]);
  }
  ReadAndFree(*again);
  EXPECT_TRUE(Write(area_bytes_).has_value()) << "an empty ring refused its whole area";
}

// The newer blocks are freed first: their space must stay unused until the
// oldest block, still live, is freed too.
TEST_F(ShmRingTest, OutOfOrderFreesLeaveTheOldestBlockAlone) {
  std::vector<ShmDescriptor> blocks;
  while (std::optional<ShmDescriptor> d = Write(10000)) blocks.push_back(*d);
  ASSERT_GE(blocks.size(), 3u);
  const ShmDescriptor oldest = blocks[0];
  for (size_t i = blocks.size() - 1; i > 0; --i) ReadAndFree(blocks[i]);

  std::vector<ShmDescriptor> later;
  for (int round = 0; round < 3; ++round) {
    for (size_t bytes : {10000, 20000, 3000, 64, 1, 0}) {
      std::optional<ShmDescriptor> d = Write(bytes);
      if (!d.has_value()) continue;
      EXPECT_FALSE(Overlap(oldest, *d)) << d->Encode() << " overlaps the live " << oldest.Encode();
      later.push_back(*d);
    }
  }
  ReadAndFree(oldest);
  for (const ShmDescriptor& d : later) ReadAndFree(d);
  EXPECT_TRUE(Write(area_bytes_).has_value());
}

TEST_F(ShmRingTest, BlockLargerThanTheRegionIsRefused) {
  EXPECT_FALSE(ring_->Allocate(kRegion).has_value());
  EXPECT_FALSE(ring_->Allocate(area_bytes_ + 1).has_value());
  EXPECT_FALSE(ring_->Allocate(area_bytes_ + kShmBlockAlignment).has_value());
  EXPECT_FALSE(ring_->Allocate(1 << 30).has_value());
  std::optional<ShmDescriptor> whole = Write(area_bytes_);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->offset, 0u);
  ReadAndFree(*whole);
}

// Sizes whose rounding arithmetic wraps around 2^64 (to 0, or to a size that
// fits the area).
TEST_F(ShmRingTest, SizesThatWrapAroundAreRefused) {
  for (size_t bytes : {kSizeMax, kSizeMax - 1, kSizeMax - 100, kSizeMax - 4094, kSizeMax - 4095, kSizeMax - 4096,
                       kSizeMax - 8190, kSizeMax - area_bytes_ + 1}) {
    std::optional<ShmRing::Block> block = ring_->Allocate(bytes);
    EXPECT_FALSE(block.has_value()) << "Allocate(" << bytes << ") gave " << block->descriptor.Encode();
  }
  std::optional<ShmDescriptor> whole = Write(area_bytes_);  // none of them took space
  ASSERT_TRUE(whole.has_value());
  ReadAndFree(*whole);
}

TEST_F(ShmRingTest, WithdrawnBlockCannotBeTaken) {
  std::optional<ShmDescriptor> d = Write(100);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(ring_->withdrawn(), 0);
  EXPECT_TRUE(ring_->Withdraw(*d));
  EXPECT_EQ(ring_->withdrawn(), 1);
  absl::StatusOr<const char*> taken = reader_->Take(*d);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kFailedPrecondition) << taken.status();
  EXPECT_THAT(taken.status().message(), HasSubstr("withdrawn"));
  EXPECT_FALSE(ring_->Withdraw(*d)) << "withdrawn twice";
  EXPECT_EQ(ring_->withdrawn(), 1);
  EXPECT_TRUE(Write(area_bytes_).has_value()) << "the withdrawn block's space did not come back";
}

TEST_F(ShmRingTest, TakenBlockCannotBeWithdrawn) {
  std::optional<ShmDescriptor> d = Write(100);
  ASSERT_TRUE(d.has_value());
  absl::StatusOr<const char*> taken = reader_->Take(*d);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_FALSE(ring_->Withdraw(*d));
  EXPECT_EQ(ring_->withdrawn(), 0);
  EXPECT_EQ(reader_->Take(*d).status().code(), absl::StatusCode::kFailedPrecondition) << "taken twice";
  EXPECT_FALSE(ring_->Allocate(area_bytes_).has_value()) << "the reader's block was reused";
  EXPECT_EQ(FirstWrongByte(*taken, *d), -1);
  reader_->Free(*d);
  EXPECT_TRUE(Write(area_bytes_).has_value());
}

TEST_F(ShmRingTest, StaleDescriptorFailsInsteadOfReadingTheNewBlock) {
  // Whole-area blocks: the new one must be where the old one was, same size.
  std::optional<ShmDescriptor> old = Write(area_bytes_);
  ASSERT_TRUE(old.has_value());
  ReadAndFree(*old);
  std::optional<ShmDescriptor> fresh = Write(area_bytes_);
  ASSERT_TRUE(fresh.has_value());
  ASSERT_EQ(fresh->offset, old->offset);
  ASSERT_NE(fresh->seq, old->seq);
  EXPECT_EQ(TakeCode(*old), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(ring_->Withdraw(*old));
  absl::StatusOr<const char*> taken = reader_->Take(*fresh);
  ASSERT_TRUE(taken.ok()) << "the stale descriptor disturbed the new block: " << taken.status();
  EXPECT_EQ(FirstWrongByte(*taken, *fresh), -1);
  EXPECT_EQ(TakeCode(*old), absl::StatusCode::kFailedPrecondition);  // nor once the new one is taken
  reader_->Free(*fresh);
}

// A late descriptor of a withdrawn block whose place now lies inside a newer
// block's payload, where the payload happens to hold what the old block's
// table slot held (its state word, (seq << 2) | 1 in shm_ring.cc, then its
// size): small integers, as an int64 tensor may hold. The state words are in
// the table, so neither the old descriptor nor one forged with the newer
// block's seq reaches the payload.
TEST_F(ShmRingTest, StaleDescriptorIntoANewerPayloadFails) {
  std::optional<ShmDescriptor> first = Write(0);
  std::optional<ShmDescriptor> old = Write(100);
  ASSERT_TRUE(first.has_value() && old.has_value());
  ReadAndFree(*first);
  ASSERT_TRUE(ring_->Withdraw(*old));  // its call failed; its descriptor is still on its way
  std::optional<ShmRing::Block> fresh = ring_->Allocate(3 * kShmBlockAlignment);
  ASSERT_TRUE(fresh.has_value());
  const ShmDescriptor d = fresh->descriptor;
  ASSERT_TRUE(d.offset < old->offset && End(*old) <= End(d)) << d.Encode() << " does not cover " << old->Encode();
  Fill(fresh->payload, d);
  const uint64_t lookalike[2] = {(old->seq << 2) | 1, old->bytes};
  for (uint64_t at = 0; at < d.bytes; at += kShmBlockAlignment) {  // at every block start, and the old one's
    std::memcpy(fresh->payload + at, lookalike, sizeof(lookalike));
  }
  const std::string before(fresh->payload, d.bytes);

  for (const ShmDescriptor& stale : {*old, ShmDescriptor{old->offset, old->bytes, d.seq},
                                     ShmDescriptor{old->offset, d.bytes - (old->offset - d.offset), d.seq}}) {
    absl::StatusOr<const char*> taken = reader_->Take(stale);
    EXPECT_FALSE(taken.ok()) << "the stale " << stale.Encode() << " read bytes of " << d.Encode();
    EXPECT_TRUE(absl::IsFailedPrecondition(taken.status()) || absl::IsInvalidArgument(taken.status()))
        << stale.Encode() << ": " << taken.status();
    EXPECT_FALSE(ring_->Withdraw(stale)) << stale.Encode();
    EXPECT_TRUE(std::string(fresh->payload, d.bytes) == before) << stale.Encode() << " changed a newer payload";
  }
  absl::StatusOr<const char*> taken = reader_->Take(d);  // the newer block is still live, and whole
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_TRUE(std::string(*taken, d.bytes) == before);
  reader_->Free(d);
  EXPECT_EQ(ring_->withdrawn(), 1);
}

// The writer withdraws a block late (its call failed after the space was
// already reclaimed and reused): the old seq names nothing, and the newer
// block, at the same place or covering it, stays the reader's to take.
TEST_F(ShmRingTest, StaleWithdrawLeavesTheNewerBlockTakeable) {
  std::optional<ShmDescriptor> old = Write(100);
  std::optional<ShmDescriptor> covered = Write(100);
  ASSERT_TRUE(old.has_value() && covered.has_value());
  ReadAndFree(*old);
  ReadAndFree(*covered);
  std::optional<ShmDescriptor> fresh = Write(2 * kShmBlockAlignment);  // over both places
  ASSERT_TRUE(fresh.has_value());
  ASSERT_EQ(fresh->offset, old->offset);
  ASSERT_TRUE(End(*covered) <= End(*fresh)) << fresh->Encode();
  EXPECT_FALSE(ring_->Withdraw(*old)) << "a stale Withdraw took the newer block at its place";
  EXPECT_FALSE(ring_->Withdraw(*covered)) << "a stale Withdraw inside the newer block succeeded";
  EXPECT_FALSE(ring_->Withdraw(ShmDescriptor{covered->offset, covered->bytes, fresh->seq}));
  EXPECT_EQ(ring_->withdrawn(), 0);
  ReadAndFree(*fresh);

  // A block withdrawn once, its place then reused: a second, late Withdraw.
  std::optional<ShmDescriptor> withdrawn = Write(100);
  ASSERT_TRUE(withdrawn.has_value());
  ASSERT_TRUE(ring_->Withdraw(*withdrawn));
  std::optional<ShmDescriptor> reused = Write(area_bytes_);
  ASSERT_TRUE(reused.has_value());
  ASSERT_EQ(reused->offset, withdrawn->offset);
  EXPECT_FALSE(ring_->Withdraw(*withdrawn)) << "withdrawn twice, the second time over a newer block";
  EXPECT_EQ(ring_->withdrawn(), 1);
  ReadAndFree(*reused);
}

// Descriptors that do not name a place of the area: a misaligned offset, an
// offset at or past the area's end, or bytes that run past it.
std::vector<ShmDescriptor> OutsideTheArea(const ShmDescriptor& d, uint64_t area) {
  const uint64_t last = area - kShmBlockAlignment;  // the last place a block starts
  return {
      {d.offset + 8, 100, d.seq},                                  // misaligned
      {d.offset + 1, 100, d.seq},                                  // misaligned
      {d.offset + 2048, 0, d.seq},                                 // misaligned
      {area, 0, d.seq},                                            // past the end
      {area + kShmBlockAlignment, 0, 1},                           // past the end
      {area + 16 * kShmBlockAlignment, 0, 1},                      // past the whole region
      {kU64Max - kShmBlockAlignment + 1, 0, 1},                    // far past the end (aligned)
      {kU64Max - 63, 0, 1},                                        // far past the end
      {last, kShmBlockAlignment + 1, 1},                           // bytes run past the end
      {last - kShmBlockAlignment, 2 * kShmBlockAlignment + 1, 1},  // bytes run past the end
      {d.offset, area - d.offset + 1, d.seq},                      // bytes run past the end
      {d.offset, kU64Max, d.seq},                                  // bytes run past the end
      {d.offset, kU64Max - kShmBlockAlignment + 1, d.seq},         // bytes run past the end
  };
}

TEST_F(ShmRingTest, TakeOfDescriptorsOutsideTheRegionIsInvalidArgument) {
  std::optional<ShmDescriptor> d = Write(100);
  ASSERT_TRUE(d.has_value());
  for (const ShmDescriptor& bad : OutsideTheArea(*d, area_bytes_)) {
    absl::StatusOr<const char*> taken = reader_->Take(bad);
    EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument) << bad.Encode() << ": " << taken.status();
    EXPECT_THAT(taken.status().message(), HasSubstr("does not name a block")) << bad.Encode();
  }
  ReadAndFree(*d);  // none of them touched the block
}

// Free and Withdraw of a descriptor whose offset is not a place of the area
// write nothing (a huge offset would otherwise land far outside the table).
TEST_F(ShmRingTest, FreeAndWithdrawIgnoreDescriptorsOutsideTheArea) {
  std::optional<ShmDescriptor> d = Write(100);
  ASSERT_TRUE(d.has_value());
  const std::string table_before(segment_->data(), layout_.table_bytes);
  for (const ShmDescriptor& bad : OutsideTheArea(*d, area_bytes_)) {
    if (bad.offset % kShmBlockAlignment == 0 && bad.offset < area_bytes_) continue;  // a place: only bytes are wrong
    EXPECT_FALSE(ring_->Withdraw(bad)) << bad.Encode();
    reader_->Free(bad);
    EXPECT_TRUE(std::string(segment_->data(), layout_.table_bytes) == table_before) << bad.Encode();
  }
  EXPECT_EQ(ring_->withdrawn(), 0);
  ReadAndFree(*d);
}

TEST_F(ShmRingTest, TakeWithAnotherByteCountIsInvalidArgument) {
  for (uint64_t bytes : {uint64_t{99}, uint64_t{101}, uint64_t{0}, uint64_t{4096}, uint64_t{8192}, area_bytes_}) {
    std::optional<ShmDescriptor> d = Write(100);
    ASSERT_TRUE(d.has_value());
    const ShmDescriptor wrong{d->offset, std::min(bytes, area_bytes_ - d->offset), d->seq};
    absl::StatusOr<const char*> taken = reader_->Take(wrong);
    EXPECT_EQ(taken.status().code(), absl::StatusCode::kInvalidArgument) << wrong.Encode() << ": " << taken.status();
    EXPECT_THAT(taken.status().message(), HasSubstr("its block holds 100")) << wrong.Encode();
    // The refused Take gave the block back: it cannot be taken, and its space is reused.
    EXPECT_EQ(TakeCode(*d), absl::StatusCode::kFailedPrecondition) << d->Encode();
  }
  EXPECT_TRUE(Write(area_bytes_).has_value()) << "a block refused for its byte count was never freed";
}

TEST_F(ShmRingTest, UnreadBlockIsWithdrawnByTheNextAllocate) {
  Build(absl::ZeroDuration());
  std::optional<ShmDescriptor> unread = Write(100);
  ASSERT_TRUE(unread.has_value());
  absl::SleepFor(absl::Milliseconds(2));  // past withdraw_after by any clock's resolution
  std::optional<ShmDescriptor> next = Write(100);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(ring_->withdrawn(), 1);
  absl::StatusOr<const char*> taken = reader_->Take(*unread);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kFailedPrecondition) << taken.status();
  ReadAndFree(*next);
}

TEST_F(ShmRingTest, TakenBlockIsNotWithdrawnAfterWithdrawAfter) {
  Build(absl::ZeroDuration());
  std::optional<ShmDescriptor> held = Write(10000);
  ASSERT_TRUE(held.has_value());
  absl::StatusOr<const char*> taken = reader_->Take(*held);
  ASSERT_TRUE(taken.ok()) << taken.status();
  std::vector<ShmDescriptor> unread;
  for (int i = 0; i < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(2));
    std::optional<ShmDescriptor> d = Write(10000);
    ASSERT_TRUE(d.has_value());
    EXPECT_FALSE(Overlap(*held, *d));
    unread.push_back(*d);
  }
  EXPECT_EQ(ring_->withdrawn(), 0) << "blocks behind a taken one were withdrawn";
  EXPECT_EQ(FirstWrongByte(*taken, *held), -1);
  reader_->Free(*held);
  absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(Write(1).has_value());
  EXPECT_EQ(ring_->withdrawn(), 2);  // both unread blocks, oldest first
  for (const ShmDescriptor& d : unread) EXPECT_EQ(TakeCode(d), absl::StatusCode::kFailedPrecondition);
}

// One writer thread and one reader thread, descriptors passed through a
// queue: every block arrives in order, whole, and uncorrupted by the
// writer's later blocks.
// A pipeline keeps two or three 2 MiB blocks in flight in a 64 MiB region:
// the ring goes back to its start once past four times the most in flight
// (at least 16 MiB: here 24), so it never reaches half the region, nor
// commits it.
TEST(ShmRingFootprintTest, APipelineStaysNearTheStartOfTheRegion) {
  constexpr size_t kRegion = 64 << 20, kBlock = 2 << 20;
  struct statvfs shm;
  if (statvfs("/dev/shm", &shm) != 0 || uint64_t{shm.f_bavail} * shm.f_frsize < 4 * kRegion) {
    GTEST_SKIP() << "/dev/shm has less than " << (4 * kRegion >> 20) << " MiB free (a container's default is 64 MiB)";
  }
  std::unique_ptr<SharedSegment> segment = MakeSegment(kRegion);
  ASSERT_NE(segment, nullptr);
  segment->Unlink();
  ShmRing ring(segment.get(), 0, kRegion, absl::InfiniteDuration());
  ShmRingReader reader(segment->data(), kRegion);
  std::deque<ShmDescriptor> live;
  uint64_t reach = 0;
  for (int i = 0; i < 100; ++i) {
    std::optional<ShmRing::Block> block = ring.Allocate(kBlock);
    ASSERT_TRUE(block.has_value()) << "block " << i;
    reach = std::max(reach, End(block->descriptor));
    live.push_back(block->descriptor);
    if (live.size() > 2) {
      ASSERT_TRUE(reader.Take(live.front()).ok());
      reader.Free(live.front());
      live.pop_front();
    }
  }
  EXPECT_LE(reach, 4 * 3 * kBlock) << "four times the three blocks in flight; of an area of "
                                   << ShmRegionLayout(kRegion).area_bytes;
  EXPECT_LT(reach, kRegion / 2);
  EXPECT_GT(reach, 4 * kBlock) << "went back to the start before its footprint";
}

TEST(ShmRingThreadsTest, WriterAndReaderThreadsPassThousandsOfBlocks) {
  constexpr size_t kRegion = 64 * kShmBlockAlignment;
  constexpr int kBlocks = 5000;
  std::unique_ptr<SharedSegment> segment = MakeSegment(kRegion);
  ASSERT_NE(segment, nullptr);
  ShmRing ring(segment.get(), 0, kRegion, absl::InfiniteDuration());
  ShmRingReader reader(segment->data(), kRegion);
  const char* const area = segment->data() + ShmRegionLayout(kRegion).table_bytes;
  absl::Mutex mu;
  std::deque<ShmDescriptor> queue;

  std::thread writer([&] {
    for (int i = 0; i < kBlocks; ++i) {
      const size_t bytes = (static_cast<size_t>(i) * 7919) % 20000;
      std::optional<ShmRing::Block> block;
      while (!(block = ring.Allocate(bytes)).has_value()) std::this_thread::yield();
      Fill(block->payload, block->descriptor);
      absl::MutexLock lock(&mu);
      queue.push_back(block->descriptor);
    }
  });
  int read = 0, failed = 0, corrupt = 0, out_of_order = 0, misplaced = 0;
  uint64_t last_seq = 0;
  for (int i = 0; i < kBlocks; ++i) {
    ShmDescriptor d;
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](std::deque<ShmDescriptor>* q) { return !q->empty(); }, &queue));
      d = queue.front();
      queue.pop_front();
    }
    absl::StatusOr<const char*> payload = reader.Take(d);
    if (!payload.ok()) {
      ++failed;
      continue;
    }
    if (*payload != area + d.offset) ++misplaced;
    if (FirstWrongByte(*payload, d) != -1) ++corrupt;
    if (d.seq <= last_seq) ++out_of_order;
    last_seq = d.seq;
    reader.Free(d);
    ++read;
  }
  writer.join();
  EXPECT_EQ(read, kBlocks);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(misplaced, 0);
  EXPECT_EQ(corrupt, 0);
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(ring.withdrawn(), 0);
}

// ---------------------------------------------------------------- ShmLane

struct Lanes {
  std::shared_ptr<ShmLane> client;
  std::shared_ptr<ShmLane> server;
};

// A client's lane and the server's end of its offer, as a channel sets them up.
Lanes MakeLanes(size_t half_bytes) {
  absl::StatusOr<std::shared_ptr<ShmLane>> client = ShmLane::CreateForClient(half_bytes);
  EXPECT_TRUE(client.ok()) << client.status();
  if (!client.ok()) return {};
  absl::StatusOr<std::shared_ptr<ShmLane>> server = ShmLane::AcceptOffer((*client)->offer());
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return {};
  (*client)->Unlink();
  return {*client, *server};
}

// A frame whose payload is `payload` in `pieces` chunks, each holding it.
OutgoingFrame MakeFrame(const std::string& header, const std::shared_ptr<std::string>& payload, int pieces) {
  OutgoingFrame frame;
  frame.header = header;
  const size_t step = payload->size() / pieces;
  for (int i = 0; i < pieces; ++i) {
    const size_t at = i * step;
    const size_t n = i + 1 == pieces ? payload->size() - at : step;
    frame.chunks.push_back({payload->data() + at, n, payload});
  }
  return frame;
}

// What a receiver does with a frame that came as header + descriptor.
absl::StatusOr<IncomingFrame> ReadFrame(ShmLane& lane, const std::string& header, const ShmDescriptor& d,
                                        std::weak_ptr<std::string>* wire_watch = nullptr) {
  auto wire = std::make_shared<std::string>(EncodeWireHeader(header));
  if (wire_watch != nullptr) *wire_watch = wire;
  std::vector<IncomingFrame::Piece> pieces = {{wire->data(), wire->size()}};
  return lane.Read(std::move(pieces), wire, d);
}

std::string ReadPayload(IncomingFrame& frame) {
  std::string out(frame.remaining(), '\0');
  const absl::Status status = frame.Read(out.data(), out.size());
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(ShmLaneTest, ClientFrameArrivesAtTheServer) {
  Lanes lanes = MakeLanes(4 << 20);
  ASSERT_NE(lanes.server, nullptr);
  auto payload = std::make_shared<std::string>(Pattern(1 << 20, 3));
  const std::string sent = *payload;
  OutgoingFrame frame = MakeFrame("a header", payload, 3);
  ASSERT_EQ(payload.use_count(), 4);
  std::optional<ShmDescriptor> d = lanes.client->Write(frame);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->bytes, 1u << 20);
  EXPECT_TRUE(frame.chunks.empty());
  EXPECT_EQ(payload.use_count(), 1) << "Write kept the frame's chunks";
  std::fill(payload->begin(), payload->end(), 'z');  // the block is a copy

  absl::StatusOr<IncomingFrame> in = ReadFrame(*lanes.server, "a header", *d);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->header(), "a header");
  EXPECT_EQ(in->payload_bytes(), 1u << 20);
  EXPECT_TRUE(ReadPayload(*in) == sent) << "the payload arrived changed";
}

TEST(ShmLaneTest, ServerFrameArrivesAtTheClient) {
  Lanes lanes = MakeLanes(1 << 20);
  ASSERT_NE(lanes.server, nullptr);
  auto payload = std::make_shared<std::string>(Pattern(300 * 1024, 4));
  OutgoingFrame frame = MakeFrame("response", payload, 1);
  std::optional<ShmDescriptor> d = lanes.server->Write(frame);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(lanes.server->Read({}, nullptr, *d).status().code(), absl::StatusCode::kFailedPrecondition)
      << "the server read its own half";
  absl::StatusOr<IncomingFrame> in = ReadFrame(*lanes.client, "response", *d);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ(in->header(), "response");
  EXPECT_TRUE(ReadPayload(*in) == *payload) << "the payload arrived changed";
}

TEST(ShmLaneTest, FramesThatAreSmallOrDoNotFitAreNotWritten) {
  Lanes lanes = MakeLanes(1 << 20);
  ASSERT_NE(lanes.server, nullptr);
  // A half of 1 MiB holds its state table too: a payload of the whole half does not fit.
  const size_t area = ShmRegionLayout(1 << 20).area_bytes;
  ASSERT_LT(area, size_t{1} << 20);
  for (size_t bytes : {size_t{0}, size_t{100}, kShmMinPayloadBytes - 1, area + 1, size_t{1} << 20, size_t{1} << 21}) {
    auto payload = std::make_shared<std::string>(Pattern(bytes, 5));
    OutgoingFrame frame = MakeFrame("h", payload, 2);
    EXPECT_FALSE(lanes.client->Write(frame).has_value()) << bytes;
    ASSERT_EQ(frame.chunks.size(), 2u) << bytes;
    EXPECT_EQ(frame.chunks[0].data, payload->data());
    EXPECT_EQ(frame.payload_bytes(), bytes);
    EXPECT_EQ(frame.header, "h");
    EXPECT_EQ(payload.use_count(), 3) << bytes;
  }
  auto smallest = std::make_shared<std::string>(Pattern(kShmMinPayloadBytes, 6));
  OutgoingFrame frame = MakeFrame("h", smallest, 1);
  std::optional<ShmDescriptor> d = lanes.client->Write(frame);
  EXPECT_TRUE(d.has_value()) << "a frame of kShmMinPayloadBytes stayed on the socket";
  if (d.has_value()) {
    absl::StatusOr<IncomingFrame> in = ReadFrame(*lanes.server, "h", *d);
    ASSERT_TRUE(in.ok()) << in.status();
    EXPECT_TRUE(ReadPayload(*in) == *smallest);
  }
  auto largest = std::make_shared<std::string>(Pattern(area, 7));
  OutgoingFrame whole = MakeFrame("h", largest, 2);
  EXPECT_TRUE(lanes.client->Write(whole).has_value()) << "a frame of the whole area stayed on the socket";
}

TEST(ShmLaneTest, OfferFromAnotherHostOrOfAnotherSizeIsRefused) {
  absl::StatusOr<std::shared_ptr<ShmLane>> odd = ShmLane::CreateForClient(3 * 4096 + 1);
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_EQ((*odd)->offer().half_bytes, 4u * 4096) << "not rounded up to blocks";
  absl::StatusOr<std::shared_ptr<ShmLane>> client = ShmLane::CreateForClient(1000);
  ASSERT_TRUE(client.ok()) << client.status();
  const ShmOffer offer = (*client)->offer();
  EXPECT_EQ(offer.half_bytes, 8192u);  // the smallest half: its table and one block
  EXPECT_TRUE(ShmOffer::Parse(offer.Encode()).ok()) << offer.Encode();
  EXPECT_EQ(offer.host, SharedMemoryHostIdentity());
  EXPECT_EQ(offer.pid, getpid());
  for (const std::string& host : {std::string("another-boot/net:1/pid:1"), std::string()}) {
    ShmOffer elsewhere = offer;
    elsewhere.host = host;
    absl::StatusOr<std::shared_ptr<ShmLane>> server = ShmLane::AcceptOffer(elsewhere);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kFailedPrecondition) << "'" << host << "': " << server.status();
  }
  ShmOffer bigger = offer;
  bigger.half_bytes *= 2;
  EXPECT_EQ(ShmLane::AcceptOffer(bigger).status().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::shared_ptr<ShmLane>> server = ShmLane::AcceptOffer(offer);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->client_pid(), getpid());
}

// Each frame needs most of a half: without the read frame giving its block
// back when it goes, the next Write would find no room.
TEST(ShmLaneTest, BlockIsFreedWhenTheReadFrameIsGone) {
  Lanes lanes = MakeLanes(1 << 20);
  ASSERT_NE(lanes.server, nullptr);
  for (int i = 0; i < 20; ++i) {
    auto payload = std::make_shared<std::string>(Pattern(700 * 1024, i));
    OutgoingFrame frame = MakeFrame("h", payload, 1);
    std::optional<ShmDescriptor> d = lanes.client->Write(frame);
    ASSERT_TRUE(d.has_value()) << "frame " << i << " found no room";
    absl::StatusOr<IncomingFrame> in = ReadFrame(*lanes.server, "h", *d);
    ASSERT_TRUE(in.ok()) << in.status();
    OutgoingFrame another = MakeFrame("h", payload, 1);
    EXPECT_FALSE(lanes.client->Write(another).has_value()) << "frame " << i << " is still held";
    EXPECT_TRUE(ReadPayload(*in) == *payload) << "frame " << i << " arrived changed";
  }
  EXPECT_EQ(lanes.client->withdrawn(), 0);
}

TEST(ShmLaneTest, ReadFrameKeepsItsWireHeaderAndTheLane) {
  Lanes lanes = MakeLanes(1 << 20);
  ASSERT_NE(lanes.server, nullptr);
  auto payload = std::make_shared<std::string>(Pattern(100 * 1024, 8));
  OutgoingFrame frame = MakeFrame("h", payload, 1);
  std::optional<ShmDescriptor> d = lanes.client->Write(frame);
  ASSERT_TRUE(d.has_value());
  std::weak_ptr<std::string> wire;
  std::weak_ptr<ShmLane> server = lanes.server;
  std::optional<absl::StatusOr<IncomingFrame>> in(ReadFrame(*lanes.server, "h", *d, &wire));
  ASSERT_TRUE(in->ok()) << in->status();
  lanes.server.reset();
  EXPECT_FALSE(wire.expired());
  EXPECT_FALSE(server.expired()) << "the frame's payload outlived its mapping";
  EXPECT_TRUE(ReadPayload(**in) == *payload);
  in.reset();
  EXPECT_TRUE(wire.expired());
  EXPECT_TRUE(server.expired());
}

TEST(ShmLaneTest, ReadOfAWithdrawnOrForeignBlockFails) {
  Lanes lanes = MakeLanes(1 << 20);
  ASSERT_NE(lanes.server, nullptr);
  auto payload = std::make_shared<std::string>(Pattern(100 * 1024, 9));
  OutgoingFrame frame = MakeFrame("h", payload, 1);
  std::optional<ShmDescriptor> d = lanes.client->Write(frame);
  ASSERT_TRUE(d.has_value());
  lanes.client->Withdraw(*d);
  EXPECT_EQ(lanes.client->withdrawn(), 1);
  EXPECT_EQ(ReadFrame(*lanes.server, "h", *d).status().code(), absl::StatusCode::kFailedPrecondition);
  const uint64_t area = ShmRegionLayout(1 << 20).area_bytes;
  for (const ShmDescriptor& outside : {ShmDescriptor{area, 0, 1},              // one past the client's blocks
                                       ShmDescriptor{1 << 20, 0, 1},           // one past the client's half
                                       ShmDescriptor{0, area + 1, d->seq}}) {  // runs past the blocks
    EXPECT_EQ(ReadFrame(*lanes.server, "h", outside).status().code(), absl::StatusCode::kInvalidArgument)
        << outside.Encode();
  }
}

}  // namespace
}  // namespace pstrain
