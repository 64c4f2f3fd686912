// The ucx transport's splitting of frames into parts and their reassembly
// (common/transport/ucx/message_parts.h), without UCX.
#include <cstring>
#include <string>
#include <vector>

#include "common/transport/ucx/message_parts.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain::ucx_parts {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P2(Span, first, count, "") {
  return arg.first == static_cast<size_t>(first) && arg.count == static_cast<size_t>(count);
}

TEST(SplitIntoPartsTest, SmallPiecesStayOnePart) {
  EXPECT_THAT(SplitIntoParts({4, 10, 1000}, 1024), ElementsAre(Span(0, 3)));
  EXPECT_THAT(SplitIntoParts({}, 1024), ElementsAre(Span(0, 0)));
}

TEST(SplitIntoPartsTest, EveryLargePieceIsAPartOfItsOwn) {
  // text, wire header, big, small, small, big, big, small
  EXPECT_THAT(SplitIntoParts({4, 10, 4096, 8, 8, 1024, 5000, 3}, 1024),
              ElementsAre(Span(0, 2), Span(2, 1), Span(3, 2), Span(5, 1), Span(6, 1), Span(7, 1)));
  EXPECT_THAT(SplitIntoParts({2048}, 1024), ElementsAre(Span(0, 1)));
  EXPECT_THAT(SplitIntoParts({2048, 1}, 1024), ElementsAre(Span(0, 1), Span(1, 1)));
}

TEST(SplitIntoPartsTest, DefaultThresholdIsAboveRendezvousSizes) {
  EXPECT_THAT(SplitIntoParts({16, kOwnPartBytes - 1}), ElementsAre(Span(0, 2)));
  EXPECT_THAT(SplitIntoParts({16, kOwnPartBytes}), ElementsAre(Span(0, 1), Span(1, 1)));
}

ReceivedPart PartOf(const std::string& text) {
  std::shared_ptr<char> data(new char[text.size()], std::default_delete<char[]>());
  std::memcpy(data.get(), text.data(), text.size());
  return ReceivedPart{data, text.size()};
}

std::string Joined(const std::vector<ReceivedPart>& parts) {
  std::string out;
  for (const ReceivedPart& p : parts) out.append(p.data.get(), p.length);
  return out;
}

int kEndpointA, kEndpointB;  // their addresses stand for endpoints

TEST(PartAssemblerTest, PartsArrivingInAnyOrderMakeTheMessageInOrder) {
  PartAssembler assembler(1 << 20);
  const MessageKey key{&kEndpointA, 3, 42};
  bool quiet = false;
  for (uint32_t part : {2u, 0u, 1u}) ASSERT_TRUE(assembler.Announce(key, part, 3, 5, &quiet).ok());
  EXPECT_TRUE(assembler.Complete(key, 1, PartOf("bbbbb")).empty());
  EXPECT_TRUE(assembler.Complete(key, 2, PartOf("ccccc")).empty());
  EXPECT_EQ(assembler.in_progress(), 1u);
  std::vector<ReceivedPart> whole = assembler.Complete(key, 0, PartOf("aaaaa"));
  EXPECT_EQ(Joined(whole), "aaaaabbbbbccccc");
  EXPECT_EQ(assembler.in_progress(), 0u);
}

TEST(PartAssemblerTest, MessagesOfOtherCallsKindsAndEndpointsDoNotMix) {
  PartAssembler assembler(1 << 20);
  const MessageKey a{&kEndpointA, 3, 1}, b{&kEndpointB, 3, 1}, c{&kEndpointA, 4, 1}, d{&kEndpointA, 3, 2};
  bool quiet = false;
  for (const MessageKey& key : {a, b, c, d}) {
    ASSERT_TRUE(assembler.Announce(key, 0, 2, 1, &quiet).ok());
    ASSERT_TRUE(assembler.Announce(key, 1, 2, 1, &quiet).ok());
  }
  EXPECT_TRUE(assembler.Complete(a, 0, PartOf("a")).empty());
  EXPECT_TRUE(assembler.Complete(b, 1, PartOf("B")).empty());
  EXPECT_TRUE(assembler.Complete(c, 0, PartOf("c")).empty());
  EXPECT_EQ(Joined(assembler.Complete(a, 1, PartOf("A"))), "aA");
  EXPECT_EQ(assembler.in_progress(), 3u);
  assembler.ForgetEndpoint(&kEndpointA);  // c and d go; b stays
  EXPECT_EQ(assembler.in_progress(), 1u);
  EXPECT_TRUE(assembler.Complete(c, 1, PartOf("C")).empty()) << "a forgotten message completed";
  EXPECT_EQ(Joined(assembler.Complete(b, 0, PartOf("b"))), "bB");
}

TEST(PartAssemblerTest, MalformedPartsRefuseTheWholeMessageOnce) {
  PartAssembler assembler(1 << 20);
  const MessageKey key{&kEndpointA, 3, 7};
  bool quiet = false;
  ASSERT_TRUE(assembler.Announce(key, 0, 3, 4, &quiet).ok());
  absl::Status twice = assembler.Announce(key, 0, 3, 4, &quiet);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("part 0 of 3 arrived twice"));
  EXPECT_FALSE(quiet);
  // Its last part is refused quietly, and then the message is gone.
  EXPECT_FALSE(assembler.Announce(key, 2, 3, 4, &quiet).ok());
  EXPECT_TRUE(quiet);
  EXPECT_EQ(assembler.in_progress(), 0u);
  EXPECT_TRUE(assembler.Complete(key, 0, PartOf("late")).empty());

  const MessageKey other{&kEndpointA, 3, 8};
  ASSERT_TRUE(assembler.Announce(other, 0, 2, 4, &quiet).ok());
  absl::Status count = assembler.Announce(other, 1, 5, 4, &quiet);
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(count.message(), HasSubstr("5 parts, an earlier one said 2"));

  EXPECT_EQ(assembler.Announce({&kEndpointA, 3, 9}, 3, 3, 1, &quiet).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(assembler.Announce({&kEndpointA, 3, 9}, 0, 1, 1, &quiet).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(assembler.Announce({&kEndpointA, 3, 9}, 0, kMaxParts + 1, 1, &quiet).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PartAssemblerTest, PartsTogetherLargerThanTheLimitAreResourceExhausted) {
  PartAssembler assembler(100);
  const MessageKey key{&kEndpointB, 4, 1};
  bool quiet = false;
  ASSERT_TRUE(assembler.Announce(key, 0, 2, 60, &quiet).ok());
  absl::Status too_big = assembler.Announce(key, 1, 2, 60, &quiet);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.message(), HasSubstr("max_message_bytes 100"));
  EXPECT_EQ(assembler.in_progress(), 0u);
}

TEST(PartAssemblerTest, ForgettingOneMessageDropsItsLaterParts) {
  PartAssembler assembler(1 << 20);
  const MessageKey key{&kEndpointB, 4, 5};
  bool quiet = false;
  ASSERT_TRUE(assembler.Announce(key, 0, 2, 1, &quiet).ok());
  ASSERT_TRUE(assembler.Announce(key, 1, 2, 1, &quiet).ok());
  EXPECT_TRUE(assembler.Complete(key, 0, PartOf("x")).empty());
  assembler.Forget(key);
  EXPECT_TRUE(assembler.Complete(key, 1, PartOf("y")).empty());
  EXPECT_EQ(assembler.in_progress(), 0u);
}

// A part's claimed payload offset (AmHeader::payload_offset) must be where
// it lies: one received in place by a wrong offset is malformed, not read.
TEST(CheckPayloadOffsetsTest, APartAtAnotherPayloadOffsetThanItSaysIsMalformed) {
  auto part = [](const std::string& bytes, uint64_t payload_offset) {
    ReceivedPart p = PartOf(bytes);
    p.payload_offset = payload_offset;
    return p;
  };
  // 4 bytes of text, 2 of wire header, then the payload "abcdefghi".
  std::vector<ReceivedPart> parts = {part("TEXTwhabc", UINT64_MAX), part("defg", 3), part("hi", 7)};
  EXPECT_TRUE(CheckPayloadOffsets(parts, 4, 9).ok());
  parts[1].payload_offset = UINT64_MAX;  // not claimed: taken as it lies
  EXPECT_TRUE(CheckPayloadOffsets(parts, 4, 9).ok());

  parts[2].payload_offset = 6;  // it starts at 7
  absl::Status wrong = CheckPayloadOffsets(parts, 4, 9);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.message(), HasSubstr("part 2 says it starts at payload offset 6"));

  // A part that starts in the wire header is not in the payload at all.
  parts = {part("TEXTw", UINT64_MAX), part("habc", 0), part("defghi", 3)};
  EXPECT_EQ(CheckPayloadOffsets(parts, 4, 9).code(), absl::StatusCode::kInvalidArgument);
  // Sizes that do not add up.
  EXPECT_EQ(CheckPayloadOffsets(parts, 4, 100).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::ucx_parts
