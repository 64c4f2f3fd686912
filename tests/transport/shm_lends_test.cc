// SharedValues (common/transport/shared_values.h) and the lends of a lane
// (common/transport/grpc/shm_lends.h) on their own: arena buffers are
// aligned, reused by size once given back, and read through a peer's
// read-only mapping (this process's own /proc/self/fd here, as a colocated
// worker opens a shard's); a lent payload reads back byte for byte, its
// buffer stays out of the arena until the borrower's frame is gone, and
// what cannot be lent is not; a lane that goes keeps what a living client
// may still read; a lend that cannot be one is DATA_LOSS.
// (End to end, through a lane between processes: grpc_shm_test.)
#include "common/transport/grpc/shm_lends.h"

#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

SharedValues& Arena() {
  SharedValues* arena = SharedValues::Get();
  if (arena == nullptr) {
    ADD_FAILURE() << "no SharedValues in this process (memfd_create refused?)";
    std::abort();
  }
  return *arena;
}

std::shared_ptr<Buffer> Filled(size_t bytes, int seed) {
  std::shared_ptr<Buffer> b = Arena().Allocate(bytes);
  EXPECT_NE(b, nullptr);
  char* p = static_cast<char*>(b->data());
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>((i * 13 + seed) & 0xff);
  return b;
}

OutgoingFrame FrameOf(const std::vector<std::shared_ptr<Buffer>>& buffers) {
  OutgoingFrame frame;
  frame.header = "hdr";
  for (const auto& b : buffers) frame.chunks.push_back({b->data(), b->size(), b});
  return frame;
}

std::string PayloadOf(IncomingFrame& frame) {
  std::string out(frame.payload_bytes(), '\0');
  EXPECT_TRUE(frame.Read(out.data(), out.size()).ok());
  return out;
}

// A server and a client sharing lend words, as the two ends of a lane do.
struct Ends {
  Ends() : words(std::make_unique<ShmLendWords>()), lender(words.get()), borrower(words.get()) {
    std::memset(words.get(), 0, sizeof(ShmLendWords));
    lender.Advertise();
  }
  std::unique_ptr<ShmLendWords> words;
  ShmLender lender;
  ShmBorrower borrower;
};

TEST(SharedValuesTest, BuffersAreAlignedInTheArenaAndReusedBySizeOnceGivenBack) {
  SharedValues& arena = Arena();
  std::shared_ptr<Buffer> a = arena.Allocate(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
  EXPECT_EQ(a->size(), 1000u);
  const std::optional<uint64_t> at = arena.OffsetOf(a->data(), a->size());
  ASSERT_TRUE(at.has_value());
  EXPECT_GE(arena.committed(), *at + 1000);
  std::shared_ptr<Buffer> b = arena.Allocate(1000);
  EXPECT_NE(arena.OffsetOf(b->data(), 1000), at) << "two live buffers share memory";
  a.reset();
  std::shared_ptr<Buffer> c = arena.Allocate(1000);
  EXPECT_EQ(arena.OffsetOf(c->data(), 1000), at) << "a buffer given back was not reused for its size";
  std::vector<char> heap(64);
  EXPECT_FALSE(arena.OffsetOf(heap.data(), heap.size()).has_value());
  EXPECT_FALSE(arena.OffsetOf(c->data(), arena.size() - *at + 1).has_value()) << "a range running past the arena's end";
}

TEST(SharedValuesTest, APeerReadsTheArenaThroughItsOwnMappingAndNothingOutsideIt) {
  SharedValues& arena = Arena();
  std::shared_ptr<Buffer> b = Filled(3 << 20, 5);
  absl::StatusOr<std::unique_ptr<PeerValues>> peer = PeerValues::Open(getpid(), arena.fd(), arena.size());
  ASSERT_TRUE(peer.ok()) << peer.status();
  const uint64_t at = *arena.OffsetOf(b->data(), b->size());
  absl::StatusOr<const char*> seen = (*peer)->At(at, b->size());
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_NE(*seen, static_cast<const char*>(b->data())) << "not a mapping of its own";
  EXPECT_EQ(std::memcmp(*seen, b->data(), b->size()), 0);
  static_cast<char*>(b->data())[7] = 42;  // the same pages: a write shows through
  EXPECT_EQ((*seen)[7], 42);
  EXPECT_TRUE(absl::IsDataLoss((*peer)->At(arena.size() - 8, 16).status()));
  EXPECT_TRUE(absl::IsDataLoss((*peer)->At(arena.size() + 1, 0).status()));
  absl::StatusOr<std::unique_ptr<PeerValues>> wrong = PeerValues::Open(getpid(), arena.fd(), arena.size() / 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong.status())) << wrong.status();
  absl::StatusOr<std::unique_ptr<PeerValues>> none = PeerValues::Open(getpid(), 1 << 20, arena.size());
  EXPECT_TRUE(absl::IsFailedPrecondition(none.status())) << none.status();
}

TEST(ShmLendsTest, ALentPayloadReadsBackAndItsBuffersStayLentUntilTheFrameIsGone) {
  Ends ends;
  ASSERT_TRUE(ends.borrower.MapServerValues(getpid()));
  std::shared_ptr<Buffer> first = Filled(1 << 20, 1), second = Filled(100 << 10, 2);
  const std::string want = std::string(static_cast<char*>(first->data()), first->size()) +
                           std::string(static_cast<char*>(second->data()), second->size());
  const uint64_t second_at = *Arena().OffsetOf(second->data(), second->size());
  std::optional<ShmLend> lend = ends.lender.Lend(FrameOf({first, second}), 64 << 10, 16);
  ASSERT_TRUE(lend.has_value());
  EXPECT_EQ(lend->refs.size(), 2u);
  EXPECT_NE(lend->ticket, 0u);
  absl::StatusOr<IncomingFrame> frame = ends.borrower.Read(EncodeWireHeader("hdr"), *lend, nullptr);
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->header(), "hdr");
  EXPECT_EQ(PayloadOf(*frame), want);
  // The server lets go of its buffer (a newer value replaced it): the lend
  // still holds it, so the arena does not hand its memory out again.
  second.reset();
  std::shared_ptr<Buffer> other = Arena().Allocate(100 << 10);
  EXPECT_NE(Arena().OffsetOf(other->data(), other->size()), second_at) << "lent memory handed out again";
  EXPECT_EQ(ends.words->ticket[lend->slot], lend->ticket);
  *frame = IncomingFrame();  // the borrower is done: the lend goes back ...
  EXPECT_EQ(ends.words->ticket[lend->slot], 0u);
  // ... and the next lend drops it, so its memory is the arena's again.
  std::shared_ptr<Buffer> third = Filled(1 << 20, 3);
  ASSERT_TRUE(ends.lender.Lend(FrameOf({third}), 64 << 10, 16).has_value());
  std::shared_ptr<Buffer> reused = Arena().Allocate(100 << 10);
  EXPECT_EQ(Arena().OffsetOf(reused->data(), reused->size()), second_at);
}

TEST(ShmLendsTest, WhatCannotBeLentIsNot) {
  Ends ends;
  std::shared_ptr<Buffer> in_arena = Filled(1 << 20, 1);
  EXPECT_FALSE(ends.lender.Lend(FrameOf({in_arena}), 64 << 10, 16).has_value()) << "lent before the client maps";
  ASSERT_TRUE(ends.borrower.MapServerValues(getpid()));
  std::shared_ptr<Buffer> heap = Buffer::Allocate(1 << 20);
  EXPECT_FALSE(ends.lender.Lend(FrameOf({in_arena, heap}), 64 << 10, 16).has_value()) << "a heap chunk lent";
  EXPECT_FALSE(ends.lender.Lend(FrameOf({in_arena}), 2 << 20, 16).has_value()) << "below the least bytes";
  OutgoingFrame unowned = FrameOf({in_arena});
  unowned.chunks[0].owner = nullptr;
  EXPECT_FALSE(ends.lender.Lend(unowned, 64 << 10, 16).has_value()) << "a chunk nothing keeps alive lent";
  EXPECT_FALSE(ends.lender.Lend(FrameOf({in_arena, in_arena}), 64 << 10, 1).has_value()) << "past the most pieces";
  // Every slot lent: the next answer is copied instead.
  for (uint32_t i = 0; i < kLendSlots; ++i) {
    ASSERT_TRUE(ends.lender.Lend(FrameOf({in_arena}), 64 << 10, 16).has_value()) << "slot " << i;
  }
  std::optional<ShmLend> more = ends.lender.Lend(FrameOf({in_arena}), 64 << 10, 16);
  EXPECT_FALSE(more.has_value());
  // A lend taken back (its record never reached the client) frees its slot.
  ShmLend back;
  back.slot = 5;
  back.ticket = ends.words->ticket[5];
  ends.lender.TakeBack(back);
  EXPECT_TRUE(ends.lender.Lend(FrameOf({in_arena}), 64 << 10, 16).has_value());
}

TEST(ShmLendsTest, ALaneThatGoesKeepsWhatItsLivingClientMayStillRead) {
  std::weak_ptr<Buffer> kept, freed, given_back;
  for (bool reader_gone : {false, true}) {
    Ends ends;
    ASSERT_TRUE(ends.borrower.MapServerValues(getpid()));
    std::shared_ptr<Buffer> b = Filled(1 << 20, 1), c = Filled(1 << 20, 2);
    ASSERT_TRUE(ends.lender.Lend(FrameOf({b}), 64 << 10, 16).has_value());
    std::optional<ShmLend> returned = ends.lender.Lend(FrameOf({c}), 64 << 10, 16);
    ASSERT_TRUE(returned.has_value());
    ends.words->ticket[returned->slot] = 0;  // the client gave this one back
    (reader_gone ? freed : kept) = b;
    given_back = c;
    b.reset();
    c.reset();
    ends.lender.Abandon(reader_gone);
    EXPECT_TRUE(given_back.expired()) << "a lend given back outlived its lane";
  }
  EXPECT_FALSE(kept.expired()) << "a lane dropped while its client lives let go of what it lent";
  EXPECT_TRUE(freed.expired()) << "a lane whose client has gone kept what it lent";
}

TEST(ShmLendsTest, ALendThatCannotBeOneIsDataLossAndGoesBack) {
  Ends ends;
  std::shared_ptr<Buffer> b = Filled(1 << 20, 1);
  ShmLend lend;
  lend.refs = {{*Arena().OffsetOf(b->data(), b->size()), b->size()}};
  lend.slot = 3;
  lend.ticket = 9;
  // Before the client mapped the arena.
  EXPECT_TRUE(absl::IsDataLoss(ends.borrower.Read(EncodeWireHeader("h"), lend, nullptr).status()));
  ASSERT_TRUE(ends.borrower.MapServerValues(getpid()));
  ShmLend bad = lend;
  bad.slot = kLendSlots;
  EXPECT_TRUE(absl::IsDataLoss(ends.borrower.Read(EncodeWireHeader("h"), bad, nullptr).status()));
  bad = lend;
  bad.ticket = 0;
  EXPECT_TRUE(absl::IsDataLoss(ends.borrower.Read(EncodeWireHeader("h"), bad, nullptr).status()));
  bad = lend;
  bad.refs = {{Arena().size() - 16, 64}};
  ends.words->ticket[3] = 9;
  absl::Status outside = ends.borrower.Read(EncodeWireHeader("h"), bad, nullptr).status();
  EXPECT_TRUE(absl::IsDataLoss(outside)) << outside;
  EXPECT_NE(outside.message().find("outside"), std::string_view::npos) << outside;
  EXPECT_EQ(ends.words->ticket[3], 0u) << "a bad lend was not given back";
}

}  // namespace
}  // namespace pstrain
