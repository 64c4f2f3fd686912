// ShmCallQueue (common/transport/grpc/shm_call_queue.h): records come out
// as written, around the ring's end too; a full ring refuses a record and
// writes nothing; what cannot be a record is DATA_LOSS naming what is wrong;
// a sleeping reader wakes when the writer rings. Writer and reader here are
// two objects over one region, as the two processes of a lane are.
#include "common/transport/grpc/shm_call_queue.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

// The smallest region the queue takes, rounded up.
constexpr size_t kSmallRegion = ShmCallQueue::kMinRegionBytes;

// A zero-filled, cache-line aligned region (as a new segment is).
struct Region {
  explicit Region(size_t n) : bytes(n), data(static_cast<char*>(std::aligned_alloc(64, n))) { std::memset(data, 0, n); }
  ~Region() { std::free(data); }
  char* records() const { return data + ShmCallQueue::kControlBytes; }
  size_t bytes;
  char* data;
};

ShmCallRecord Request(uint64_t id, std::string method, std::string wire) {
  ShmCallRecord r;
  r.kind = ShmCallRecord::Kind::kRequest;
  r.call_id = id;
  r.text = std::move(method);
  r.wire = std::move(wire);
  return r;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed * 7) & 0xff);
  return s;
}

void ExpectSame(const ShmCallRecord& got, const ShmCallRecord& want) {
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.call_id, want.call_id);
  EXPECT_EQ(got.status_code, want.status_code);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.wire, want.wire);
  ASSERT_EQ(got.block.has_value(), want.block.has_value());
  if (want.block.has_value()) {
    EXPECT_EQ(got.block->offset, want.block->offset);
    EXPECT_EQ(got.block->bytes, want.block->bytes);
    EXPECT_EQ(got.block->seq, want.block->seq);
  }
  ASSERT_EQ(got.values.size(), want.values.size());
  for (size_t i = 0; i < want.values.size(); ++i) {
    EXPECT_EQ(got.values[i].offset, want.values[i].offset);
    EXPECT_EQ(got.values[i].bytes, want.values[i].bytes);
  }
  EXPECT_EQ(got.lend_slot, want.lend_slot);
  EXPECT_EQ(got.lend_ticket, want.lend_ticket);
}

TEST(ShmCallQueueTest, RequestsResponsesAndPartsComeOutAsWritten) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  ShmCallRecord response;
  response.kind = ShmCallRecord::Kind::kResponse;
  response.call_id = 7;
  response.status_code = static_cast<int32_t>(absl::StatusCode::kFailedPrecondition);
  response.text = "version not applied";
  ShmCallRecord in_block = Request(8, "Push", "");
  in_block.block = ShmDescriptor{4096, 2 << 20, 3};
  ShmCallRecord part;
  part.kind = ShmCallRecord::Kind::kResponsePart;
  part.call_id = 10;
  part.wire = Pattern(64 << 10, 3);
  ShmCallRecord lent;
  lent.kind = ShmCallRecord::Kind::kResponse;
  lent.call_id = 11;
  lent.wire = Pattern(300, 4);
  lent.values = {{0, 1 << 20}, {1 << 20, 4096}, {uint64_t{5} << 30, 64}};
  lent.lend_slot = 17;
  lent.lend_ticket = 12345;
  const ShmCallRecord records[] = {Request(6, "Pull", Pattern(1000, 1)),
                                   response,
                                   in_block,
                                   Request(9, "Init", Pattern(ShmCallQueue::kMaxRecordPayload - 4, 2)),
                                   part,
                                   lent};
  for (const ShmCallRecord& r : records) ASSERT_TRUE(writer.TryPush(r));
  for (const ShmCallRecord& r : records) {
    absl::StatusOr<std::optional<ShmCallRecord>> got = reader.Pop();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(got->has_value());
    ExpectSame(**got, r);
  }
  absl::StatusOr<std::optional<ShmCallRecord>> none = reader.Pop();
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
}

TEST(ShmCallQueueTest, RecordsWrapAroundTheRingIntact) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  // Sizes that do not divide the ring, so records meet its end at every offset.
  for (int i = 0; i < 200; ++i) {
    const ShmCallRecord r = Request(i, absl::StrCat("m", i), Pattern(1000 + (i * 7919) % 60000, i));
    ASSERT_TRUE(writer.TryPush(r)) << "record " << i;
    if (i % 3 == 0) {
      ASSERT_TRUE(writer.TryPush(Request(1000 + i, "x", Pattern(17, i))));
    }
    absl::StatusOr<std::optional<ShmCallRecord>> got = reader.Pop();
    ASSERT_TRUE(got.ok() && got->has_value()) << "record " << i << ": " << got.status();
    ExpectSame(**got, r);
    if (i % 3 == 0) {
      got = reader.Pop();
      ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
      EXPECT_EQ((*got)->call_id, 1000u + i);
    }
  }
}

TEST(ShmCallQueueTest, AFullRingRefusesARecordAndWritesNothing) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  int pushed = 0;
  while (writer.TryPush(Request(pushed, "Push", Pattern(50000, pushed)))) ++pushed;
  ASSERT_GE(pushed, 4);
  const std::string before(region.data, region.bytes);
  EXPECT_FALSE(writer.TryPush(Request(99, "Push", Pattern(50000, 99))));
  EXPECT_EQ(std::string(region.data, region.bytes), before) << "a refused record changed the region";
  absl::StatusOr<std::optional<ShmCallRecord>> first = reader.Pop();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->call_id, 0u);
  EXPECT_TRUE(writer.TryPush(Request(99, "Push", Pattern(50000, 99)))) << "no room after a record was read";
  for (int i = 1; i <= pushed; ++i) {
    absl::StatusOr<std::optional<ShmCallRecord>> got = reader.Pop();
    ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
    EXPECT_EQ((*got)->call_id, i < pushed ? static_cast<uint64_t>(i) : 99u);
    EXPECT_EQ((*got)->wire, Pattern(50000, i < pushed ? i : 99));
  }
}

// One record written, then one of its words overwritten with `value`.
absl::Status PopAfterOverwriting(size_t offset, uint32_t value) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  EXPECT_TRUE(writer.TryPush(Request(1, "Pull", Pattern(100, 1))));
  std::memcpy(region.records() + offset, &value, sizeof(value));
  return reader.Pop().status();
}

TEST(ShmCallQueueTest, WhatCannotBeARecordIsDataLossNamingWhatIsWrong) {
  // The record's head: bytes (u32), kind (u32), call id (u64), status (i32),
  // text bytes (u32), wire bytes (u32), has block (u32), block offset, bytes, seq (u64),
  // value references (u32), lend slot (u32), lend ticket (u64).
  struct Case {
    const char* what;
    size_t offset;
    uint32_t value;
    const char* message;
  } cases[] = {
      {"a length past what was written", 0, 4096, "bytes at 0"},
      {"a length that is not a multiple of 8", 0, 61, "bytes at 0"},
      {"a length shorter than a head", 0, 16, "shorter than its head"},
      {"an unknown kind", 4, 9, "kind 9"},
      {"the kind after an answer's part", 4, 4, "kind 4"},
      {"text longer than the record", 20, 5000, "holding 5000"},
      {"a block flag that is neither 0 nor 1", 28, 2, "block 2"},
      {"a block beside inline bytes", 28, 1, "block 1"},
      {"values lent in a request", 56, 1, "lending 1 pieces"},
      {"a pad that stops short of the ring's end", 4, 0, "pad record"},
  };
  for (const Case& c : cases) {
    absl::Status status = PopAfterOverwriting(c.offset, c.value);
    EXPECT_TRUE(absl::IsDataLoss(status)) << c.what << ": " << status;
    EXPECT_NE(status.message().find(c.message), std::string_view::npos) << c.what << ": " << status;
  }
}

TEST(ShmCallQueueTest, PositionsThatCannotBeAreDataLoss) {
  Region region(kSmallRegion);
  ShmCallQueue reader(region.data, region.bytes);
  const uint64_t head = uint64_t{1} << 40;  // far past the ring's capacity from tail 0
  std::memcpy(region.data, &head, sizeof(head));
  absl::Status status = reader.Pop().status();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("written up to"), std::string_view::npos) << status;
}

TEST(ShmCallQueueTest, ASleepingReaderWakesWhenTheWriterRings) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  std::thread ring([&] {
    absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(writer.TryPush(Request(1, "Pull", "x")));
    writer.Ring();
  });
  const absl::Time start = absl::Now();
  std::optional<ShmCallRecord> got;
  while (!got.has_value() && absl::Now() - start < absl::Seconds(60)) {
    reader.Wait(absl::Seconds(60));
    absl::StatusOr<std::optional<ShmCallRecord>> popped = reader.Pop();
    ASSERT_TRUE(popped.ok()) << popped.status();
    got = *popped;
  }
  ring.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->call_id, 1u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "the reader slept through the ring";
}

TEST(ShmCallQueueTest, WaitReturnsAtOnceWhenARecordWaitsAndAfterItsTimeoutOtherwise) {
  Region region(kSmallRegion);
  ShmCallQueue writer(region.data, region.bytes), reader(region.data, region.bytes);
  absl::Time start = absl::Now();
  reader.Wait(absl::Milliseconds(200));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(150)) << "Wait returned early with nothing written";
  ASSERT_TRUE(writer.TryPush(Request(1, "Pull", "x")));  // no Ring: the record alone must do
  start = absl::Now();
  reader.Wait(absl::Seconds(60));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << "Wait slept with a record waiting";
}

}  // namespace
}  // namespace pstrain
