// Answers received in place over the "ucx" transport
// (CallOptions::receive_into): parts of an answer's payload land where the
// caller said before the answer is read, a caller that places nothing gets
// the answer as before, concurrent calls each land in their own memory, and
// a call whose deadline passes mid-answer ends only once its placed parts
// are in. (An answer whose part says it starts elsewhere in the payload than
// it does is malformed: ucx_message_parts_test.cc.) Real UCX over loopback;
// the same echo across emulated hosts is in ucx_across_hosts_test.cc.
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/transport/ucx/ucx_transport.h"
#include "gtest/gtest.h"
#include "tests/transport/in_place_echo.h"
#include "tests/transport/transport_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::testing_util::EchoHandler;
using ::pstrain::testing_util::FunctionHandler;
using ::pstrain::testing_util::InPlaceEcho;
using ::pstrain::testing_util::InPlaceRecord;
using ::pstrain::testing_util::RecordedDestination;

constexpr size_t kMiB = size_t{1} << 20;

class UcxInPlaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    transport_ = CreateUcxTransport(TransportOptions());
    absl::StatusOr<std::unique_ptr<Server>> server = transport_->Serve("127.0.0.1:0", &echo_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    absl::StatusOr<std::unique_ptr<Channel>> channel = transport_->Connect(absl::StrCat("127.0.0.1:", server_->port()));
    ASSERT_TRUE(channel.ok()) << channel.status();
    channel_ = *std::move(channel);
  }

  EchoHandler echo_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Channel> channel_;
};

// Every part after the first starts at a chunk: the large chunks (parts of
// their own) and the small run after them are placed at their offsets.
TEST_F(UcxInPlaceTest, PartsOfAnAnswerLandWhereTheCallerSaid) {
  InPlaceRecord record;
  ASSERT_TRUE(InPlaceEcho(*channel_, {5, kMiB, 3 * kMiB, 300 << 10, 11}, /*place=*/true, &record));
  std::map<uint64_t, size_t> expected = {
      {5, kMiB}, {5 + kMiB, 3 * kMiB}, {5 + 4 * kMiB, 300 << 10}, {5 + 4 * kMiB + (300 << 10), 11}};
  EXPECT_EQ(record.placed, expected);
}

TEST_F(UcxInPlaceTest, ACallerThatPlacesNothingGetsTheWholeAnswer) {
  InPlaceRecord record;
  ASSERT_TRUE(InPlaceEcho(*channel_, {5, 2 * kMiB, 11}, /*place=*/false, &record));
  EXPECT_TRUE(record.placed.empty());
}

// Many calls at once, each into its own memory: no part lands in another's.
TEST_F(UcxInPlaceTest, ConcurrentCallsEachLandInTheirOwnMemory) {
  constexpr int kCalls = 8;
  std::vector<std::unique_ptr<InPlaceRecord>> records(kCalls);
  std::vector<::testing::AssertionResult> results(kCalls, ::testing::AssertionSuccess());
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    records[i] = std::make_unique<InPlaceRecord>();
    threads.emplace_back([&, i] {
      results[i] = InPlaceEcho(*channel_, {3, kMiB + static_cast<size_t>(i), 1 + static_cast<size_t>(i)},
                               /*place=*/true, records[i].get());
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_TRUE(results[i]) << "call " << i;
    EXPECT_EQ(records[i]->placed.count(3), 1u) << "call " << i << ": its large chunk was not placed";
  }
}

// Calls whose deadline passes while a large answer is arriving in place: a
// call completes only once the parts placed in the caller's memory are in,
// so every placed range holds its bytes when `done` runs, whatever the call's
// outcome. Deadlines from 1 to 64 ms, so that some pass mid-answer.
TEST(UcxInPlaceDeadlineTest, ACallEndsOnlyAfterItsPlacedPartsAreIn) {
  constexpr size_t kChunk = 16 * kMiB;
  constexpr int kChunks = 8;
  auto answer = std::make_shared<std::string>(testing_util::Bytes(kChunk * kChunks, 3));
  FunctionHandler handler([answer](std::string_view, IncomingFrame, Responder respond) {
    OutgoingFrame frame;
    frame.header = "large";
    for (int c = 0; c < kChunks; ++c) frame.chunks.push_back(ConstChunk{answer->data() + c * kChunk, kChunk, answer});
    respond(absl::OkStatus(), std::move(frame));
  });
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Server>> server = transport->Serve("127.0.0.1:0", &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(absl::StrCat("127.0.0.1:", (*server)->port()));
  ASSERT_TRUE(channel.ok()) << channel.status();
  int ended_while_placed = 0;
  for (int ms : {1, 2, 4, 8, 16, 32, 64, 10000}) {
    SCOPED_TRACE(ms);
    std::string dst(answer->size(), '\0');
    InPlaceRecord record;
    CallOptions options;
    options.deadline = absl::Now() + absl::Milliseconds(ms);
    options.receive_into = RecordedDestination(&dst, /*place=*/true, &record);
    IncomingFrame response;
    absl::Status status = (*channel)->CallSync("Large", OutgoingFrame(), options, &response);
    if (ms == 10000) ASSERT_TRUE(status.ok()) << status;
    if (!status.ok()) EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    std::lock_guard<std::mutex> lock(record.mu);
    for (const auto& [offset, bytes] : record.placed) {
      EXPECT_EQ(dst.compare(offset, bytes, *answer, offset, bytes), 0)
          << "the call ended before the part at payload offset " << offset << " was in";
    }
    if (!status.ok() && !record.placed.empty()) ++ended_while_placed;
  }
  // How often a deadline met an answer on its way (timing, not asserted).
  std::cout << ended_while_placed << " of 7 calls ended by their deadline with parts placed\n";
}

}  // namespace
}  // namespace pstrain
