// Transport semantics shared by every implementation ("grpc" over loopback
// TCP, "inproc", and "ucx" in builds with UCX), plus the behaviour specific
// to each (ucx: tests/transport/ucx_transport_test.cc).
#include "common/transport/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/transport/grpc/grpc_transport.h"
#include "common/transport/inproc/inproc_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"

namespace pstrain {
namespace {

using ::pstrain::testing_util::Bytes;
using ::pstrain::testing_util::EchoHandler;
using ::pstrain::testing_util::FunctionHandler;
using ::pstrain::testing_util::HoldingHandler;
using ::pstrain::testing_util::OwnedChunk;
using ::pstrain::testing_util::ReadPayload;
using ::pstrain::testing_util::TrackedChunk;
using ::pstrain::testing_util::WaitFor;
using ::testing::HasSubstr;

// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

CallOptions Deadline(absl::Duration d, bool wait_for_ready = false) {
  CallOptions options;
  options.deadline = absl::Now() + d;
  options.wait_for_ready = wait_for_ready;
  return options;
}

// Collects the result of an asynchronous Call; counts completions.
struct AsyncResult {
  std::atomic<int> completions{0};
  absl::Notification done;
  absl::Status status;
  IncomingFrame frame;

  ResponseCallback Callback() {
    return [this](absl::Status s, IncomingFrame f) {
      if (completions.fetch_add(1) == 0) {
        status = std::move(s);
        frame = std::move(f);
        done.Notify();
      }
    };
  }
};

// ---------------------------------------------------------------- common

// The transports every TransportTest runs over.
std::vector<std::string> TransportsUnderTest() {
  std::vector<std::string> names = {"grpc", "inproc"};
#ifdef PSTRAIN_WITH_UCX
  names.push_back("ucx");
#endif
  return names;
}

class TransportTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (is_network()) {
      absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport(GetParam(), TransportOptions());
      ASSERT_TRUE(t.ok()) << t.status();
      transport_ = *std::move(t);
    } else {
      transport_ = std::make_unique<InprocTransport>();
    }
  }

  void TearDown() override {
    holding_.AnswerAll();
    for (auto& s : servers_) s->Shutdown(absl::Seconds(2));
    servers_.clear();
  }

  // Served on 127.0.0.1 ports ("grpc", "ucx"), not on inproc names.
  bool is_network() const { return GetParam() != "inproc"; }

  // Serves `handler`; returns the address clients connect to.
  std::string Serve(Handler* handler) {
    static std::atomic<int> counter{0};
    std::string listen = is_network() ? "127.0.0.1:0" : absl::StrCat("inproc-test-", counter++, ":1234");
    absl::StatusOr<std::unique_ptr<Server>> server = transport_->Serve(listen, handler);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return "";
    std::string address = is_network() ? absl::StrCat("127.0.0.1:", (*server)->port()) : listen;
    if (is_network()) {
      EXPECT_GT((*server)->port(), 0);
    }
    servers_.push_back(*std::move(server));
    return address;
  }

  // An address no server listens on.
  std::string NowhereAddress() {
    return is_network() ? absl::StrCat("127.0.0.1:", UnusedPort()) : "inproc-nobody-here:1";
  }

  // Completes one call through holding_ so the connection is up before a
  // test measures deadlines.
  void WarmUpHolding(Channel* channel) {
    AsyncResult warm;
    channel->Call("WarmUp", OutgoingFrame(), Deadline(absl::Seconds(30)), warm.Callback());
    ASSERT_TRUE(holding_.WaitForHeld(1));
    holding_.AnswerAll();
    ASSERT_TRUE(warm.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    ASSERT_TRUE(warm.status.ok()) << warm.status;
  }

  std::unique_ptr<Channel> Connect(const std::string& address) {
    absl::StatusOr<std::unique_ptr<Channel>> channel = transport_->Connect(address);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return channel.ok() ? *std::move(channel) : nullptr;
  }

  std::unique_ptr<Transport> transport_;
  EchoHandler echo_;
  HoldingHandler holding_;
  std::vector<std::unique_ptr<Server>> servers_;
};

TEST_P(TransportTest, EchoHeaderAndSeveralChunks) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  ASSERT_NE(channel, nullptr);
  const std::string header = std::string("hdr\0with\xff binary", 16) + Bytes(300, 1);  // 2-byte varint
  std::vector<std::string> parts = {"", "x", Bytes(7, 2), Bytes(4096, 3), Bytes(1 << 20, 4), Bytes(3, 5)};
  OutgoingFrame request;
  request.header = header;
  std::string expected;
  for (const std::string& p : parts) {
    request.chunks.push_back(OwnedChunk(p));
    expected += p;
  }
  IncomingFrame response;
  absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(30)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), header);
  EXPECT_EQ(response.payload_bytes(), expected.size());
  EXPECT_TRUE(ReadPayload(response) == expected);
  EXPECT_THAT(echo_.methods(), ::testing::ElementsAre("Echo"));
}

TEST_P(TransportTest, EchoEmptyFrame) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  IncomingFrame response;
  absl::Status status = channel->CallSync("Nothing", OutgoingFrame(), Deadline(absl::Seconds(30)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "");
  EXPECT_EQ(response.payload_bytes(), 0u);
}

TEST_P(TransportTest, Echo64MiBPayload) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  const std::string big = Bytes(64 << 20, 42);
  OutgoingFrame request;
  request.header = "big";
  request.chunks.push_back(OwnedChunk("small first chunk"));
  request.chunks.push_back({big.data(), big.size(), nullptr});  // `big` outlives the call
  IncomingFrame response;
  absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(60)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "big");
  ASSERT_EQ(response.payload_bytes(), big.size() + 17);
  std::string prefix(17, '\0');
  ASSERT_TRUE(response.Read(prefix.data(), 17).ok());
  EXPECT_EQ(prefix, "small first chunk");
  std::string rest = ReadPayload(response);
  EXPECT_TRUE(rest == big) << "64 MiB payload differs";
}

TEST_P(TransportTest, ManyConcurrentCalls) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  constexpr int kCalls = 40;
  std::vector<std::unique_ptr<AsyncResult>> results;
  std::vector<std::string> payloads;
  for (int i = 0; i < kCalls; ++i) {
    results.push_back(std::make_unique<AsyncResult>());
    payloads.push_back(Bytes(1000 + i * 97, 100 + i));
    OutgoingFrame request;
    request.header = absl::StrCat("call-", i);
    request.chunks.push_back(OwnedChunk(payloads.back()));
    channel->Call("Echo", std::move(request), Deadline(absl::Seconds(30)), results.back()->Callback());
  }
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(results[i]->done.WaitForNotificationWithTimeout(absl::Seconds(30))) << i;
    ASSERT_TRUE(results[i]->status.ok()) << results[i]->status;
    EXPECT_EQ(results[i]->frame.header(), absl::StrCat("call-", i));
    EXPECT_TRUE(ReadPayload(results[i]->frame) == payloads[i]) << i;
    EXPECT_EQ(results[i]->completions.load(), 1);
  }
}

TEST_P(TransportTest, RequestChunkOwnersReleasedAfterCall) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  auto small_released = std::make_shared<std::atomic<bool>>(false);
  auto big_released = std::make_shared<std::atomic<bool>>(false);
  std::weak_ptr<const void> small_weak, big_weak;
  {
    OutgoingFrame request;
    request.header = "h";
    request.chunks.push_back(TrackedChunk("tiny", small_released, &small_weak));
    request.chunks.push_back(TrackedChunk(Bytes(3 << 20, 9), big_released, &big_weak));
    IncomingFrame response;
    absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(30)), &response);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(response.payload_bytes(), 4u + (3u << 20));
  }
  EXPECT_TRUE(WaitFor([&] { return small_released->load() && big_released->load(); }))
      << "request chunk owners still alive after the call completed";
  EXPECT_TRUE(small_weak.expired());
  EXPECT_TRUE(big_weak.expired());
}

TEST_P(TransportTest, ResponseChunkOwnersReleasedAfterCall) {
  auto released = std::make_shared<std::atomic<bool>>(false);
  const std::string payload = Bytes(2 << 20, 11);
  FunctionHandler handler([&](std::string_view, IncomingFrame, Responder respond) {
    OutgoingFrame response;
    response.header = "r";
    response.chunks.push_back(TrackedChunk(payload, released));
    respond(absl::OkStatus(), std::move(response));
  });
  std::unique_ptr<Channel> channel = Connect(Serve(&handler));
  {
    IncomingFrame response;
    absl::Status status = channel->CallSync("Get", OutgoingFrame(), Deadline(absl::Seconds(30)), &response);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(ReadPayload(response) == payload);
  }
  EXPECT_TRUE(WaitFor([&] { return released->load(); })) << "response chunk owner still alive";
}

TEST_P(TransportTest, RequestChunkOwnersReleasedAfterErrorAndDeadline) {
  FunctionHandler failing(
      [](std::string_view, IncomingFrame, Responder respond) { respond(absl::InternalError("nope"), {}); });
  std::unique_ptr<Channel> channel = Connect(Serve(&failing));
  auto released = std::make_shared<std::atomic<bool>>(false);
  {
    OutgoingFrame request;
    request.chunks.push_back(TrackedChunk(Bytes(100000, 1), released));
    absl::Status status = channel->CallSync("X", std::move(request), Deadline(absl::Seconds(30)), nullptr);
    EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  }
  EXPECT_TRUE(WaitFor([&] { return released->load(); })) << "owner kept after an error answer";
}

TEST_P(TransportTest, HandlerAnswersLaterFromAnotherThread) {
  std::unique_ptr<Channel> channel = Connect(Serve(&holding_));
  OutgoingFrame request;
  request.header = "later please";
  request.chunks.push_back(OwnedChunk("req-bytes"));
  AsyncResult result;
  channel->Call("Later", std::move(request), Deadline(absl::Seconds(30)), result.Callback());
  ASSERT_TRUE(holding_.WaitForHeld(1));
  HoldingHandler::Held held = holding_.Take(0);
  EXPECT_EQ(held.method, "Later");
  EXPECT_EQ(held.header, "later please");
  EXPECT_EQ(held.payload, "req-bytes");
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(result.done.HasBeenNotified()) << "completed before the handler answered";
  const std::string answer = Bytes(100000, 77);
  std::thread answerer([&] {
    OutgoingFrame response;
    response.header = "here you go";
    response.chunks.push_back(OwnedChunk(answer));
    held.respond(absl::OkStatus(), std::move(response));
  });
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  answerer.join();
  ASSERT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.frame.header(), "here you go");
  EXPECT_TRUE(ReadPayload(result.frame) == answer);
  EXPECT_EQ(result.completions.load(), 1);
}

TEST_P(TransportTest, ErrorStatusPropagatesCodeAndMessage) {
  std::unique_ptr<Channel> channel = Connect(Serve(&echo_));
  const std::vector<absl::StatusCode> codes = {
      absl::StatusCode::kInvalidArgument,   absl::StatusCode::kNotFound,     absl::StatusCode::kFailedPrecondition,
      absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,     absl::StatusCode::kDeadlineExceeded,
      absl::StatusCode::kUnavailable,       absl::StatusCode::kAlreadyExists};
  for (absl::StatusCode code : codes) {
    SCOPED_TRACE(absl::StatusCodeToString(code));
    const std::string message = "sync step 41: waiting for gradients of fc1/weights from workers [1]";
    OutgoingFrame request;
    request.header = absl::StrCat(static_cast<int>(code), ":", message);
    request.chunks.push_back(OwnedChunk("ignored payload"));
    IncomingFrame response;
    absl::Status status = channel->CallSync("Fail", std::move(request), Deadline(absl::Seconds(30)), &response);
    EXPECT_EQ(status.code(), code);
    EXPECT_EQ(std::string(status.message()), message);
    EXPECT_EQ(response.payload_bytes(), 0u);
  }
}

TEST_P(TransportTest, DeadlineExceededWhenHandlerDoesNotAnswer) {
  std::unique_ptr<Channel> channel = Connect(Serve(&holding_));
  WarmUpHolding(channel.get());
  AsyncResult result;
  absl::Time start = absl::Now();
  OutgoingFrame request;
  request.header = "slow";
  channel->Call("Slow", std::move(request), Deadline(absl::Milliseconds(500)), result.Callback());
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(10))) << "deadline did not fire";
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450));
  ASSERT_TRUE(holding_.WaitForHeld(1));
  // The late answer is discarded: the callback ran exactly once.
  HoldingHandler::Held held = holding_.Take(0);
  OutgoingFrame late;
  late.header = "late";
  held.respond(absl::OkStatus(), std::move(late));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(result.completions.load(), 1);
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded);

  // The server still serves.
  AsyncResult second;
  OutgoingFrame again;
  again.header = "again";
  channel->Call("Slow", std::move(again), Deadline(absl::Seconds(30)), second.Callback());
  ASSERT_TRUE(holding_.WaitForHeld(2));
  holding_.AnswerAll();
  ASSERT_TRUE(second.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.frame.header(), "again");
}

TEST_P(TransportTest, DeadlineInThePastFailsQuickly) {
  std::unique_ptr<Channel> channel = Connect(Serve(&holding_));
  AsyncResult result;
  CallOptions options;
  options.deadline = absl::Now() - absl::Seconds(1);
  channel->Call("Slow", OutgoingFrame(), options, result.Callback());
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kDeadlineExceeded) << result.status;
}

TEST_P(TransportTest, UnavailableWithoutServer) {
  std::unique_ptr<Channel> channel = Connect(NowhereAddress());
  absl::Time start = absl::Now();
  absl::Status status = channel->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "UNAVAILABLE should not wait for the deadline";
}

TEST_P(TransportTest, WaitForReadyWithoutServerIsDeadlineExceeded) {
  std::unique_ptr<Channel> channel = Connect(NowhereAddress());
  absl::Time start = absl::Now();
  absl::Status status =
      channel->CallSync("Echo", OutgoingFrame(), Deadline(absl::Milliseconds(500), /*wait_for_ready=*/true), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
}

// CallOptions::wait_for_ready: "wait for the server to come up (until the
// deadline) instead of failing at once" -- the cluster start-up path (the
// chief's Init uses it while PS shards are still starting).
TEST_P(TransportTest, WaitForReadyWaitsForLateServer) {
  std::string address;
  std::unique_ptr<Server> late_server;
  if (is_network()) {
    address = absl::StrCat("127.0.0.1:", UnusedPort());
  } else {
    address = "inproc-late-server:7";
  }
  std::unique_ptr<Channel> channel = Connect(address);
  AsyncResult result;
  OutgoingFrame request;
  request.header = "are you there";
  channel->Call("Echo", std::move(request), Deadline(absl::Seconds(8), /*wait_for_ready=*/true), result.Callback());
  absl::SleepFor(absl::Milliseconds(300));
  absl::StatusOr<std::unique_ptr<Server>> server = transport_->Serve(address, &echo_);
  ASSERT_TRUE(server.ok()) << server.status();
  late_server = *std::move(server);
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.frame.header(), "are you there");
  late_server->Shutdown(absl::Seconds(1));
}

// Server::Shutdown: "stops accepting calls and waits (up to `grace`) for
// calls in flight". A handler still holding a responder (the PS parks pulls
// that way) must not make Shutdown hang past the grace period.
TEST_P(TransportTest, ShutdownReturnsAfterGraceWithCallInFlight) {
  std::unique_ptr<Channel> channel = Connect(Serve(&holding_));
  WarmUpHolding(channel.get());
  AsyncResult result;
  channel->Call("Parked", OutgoingFrame(), Deadline(absl::Seconds(30)), result.Callback());
  ASSERT_TRUE(holding_.WaitForHeld(1));
  std::atomic<bool> returned{false};
  Server* server = servers_.back().get();
  absl::Time start = absl::Now();
  std::thread shutter([&] {
    server->Shutdown(absl::Milliseconds(200));
    returned = true;
  });
  bool in_time = WaitFor([&] { return returned.load(); }, absl::Seconds(5));
  absl::Duration took = absl::Now() - start;
  // Unblock a hanging Shutdown so the test can finish either way.
  holding_.AnswerAll();
  shutter.join();
  EXPECT_TRUE(in_time) << "Shutdown(200ms) still blocked after 5s by a call whose handler had not answered";
  if (in_time) {
    EXPECT_GE(took, absl::Milliseconds(150));
  }
  // The client's call completes one way or another.
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(result.completions.load(), 1);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest, ::testing::ValuesIn(TransportsUnderTest()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// ---------------------------------------------------------------- registry

TEST(TransportRegistryTest, UnknownTransportListsKnownOnes) {
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport("nope", TransportOptions());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("nope"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("grpc"));
}

TEST(TransportRegistryTest, GrpcIsRegistered) {
  std::vector<std::string> names = RegisteredTransports();
  EXPECT_THAT(names, ::testing::Contains("grpc"));
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport("grpc", TransportOptions());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(*t, nullptr);
}

// "ucx" is registered in builds with UCX; without, asking for it says why
// it is missing and how to get it, rather than that it is unknown.
TEST(TransportRegistryTest, UcxIsRegisteredOrNamesTheMissingLibrary) {
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateTransport("ucx", TransportOptions());
#ifdef PSTRAIN_WITH_UCX
  EXPECT_THAT(RegisteredTransports(), ::testing::Contains("ucx"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_NE(*t, nullptr);
  EXPECT_EQ(TransportRegistry().UnavailableReason("ucx"), "");
#else
  EXPECT_THAT(RegisteredTransports(), ::testing::Not(::testing::Contains("ucx")));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("built without UCX"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("libucx-dev"));
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("-DPSTRAIN_WITH_UCX=ON"));
#endif
}

// ---------------------------------------------------------------- grpc only

TEST(GrpcTransportTest, ServesOnPortZeroAndPicksAPort) {
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> a = transport->Serve("127.0.0.1:0", &echo);
  absl::StatusOr<std::unique_ptr<Server>> b = transport->Serve("127.0.0.1:0", &echo);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT((*a)->port(), 0);
  EXPECT_GT((*b)->port(), 0);
  EXPECT_NE((*a)->port(), (*b)->port());
  for (auto* server : {a->get(), b->get()}) {
    absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(absl::StrCat("127.0.0.1:", server->port()));
    ASSERT_TRUE(channel.ok());
    IncomingFrame response;
    OutgoingFrame request;
    request.header = "ping";
    ASSERT_TRUE((*channel)->CallSync("Ping", std::move(request), Deadline(absl::Seconds(30)), &response).ok());
    EXPECT_EQ(response.header(), "ping");
  }
  (*a)->Shutdown(absl::Seconds(1));
  (*b)->Shutdown(absl::Seconds(1));
}

TEST(GrpcTransportTest, InvalidListenAddressIsError) {
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> server = transport->Serve("256.1.2.3:notaport", &echo);
  EXPECT_FALSE(server.ok());
}

TEST(GrpcTransportTest, UnavailableAfterServerShutdown) {
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> server = transport->Serve("127.0.0.1:0", &echo);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(absl::StrCat("127.0.0.1:", (*server)->port()));
  ASSERT_TRUE(channel.ok());
  ASSERT_TRUE((*channel)->CallSync("Ping", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr).ok());
  (*server)->Shutdown(absl::Seconds(1));
  absl::Status status = (*channel)->CallSync("Ping", OutgoingFrame(), Deadline(absl::Seconds(20)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
}

// ---------------------------------------------------------------- inproc only

TEST(InprocTransportTest, ServingAnAddressTwiceIsAlreadyExists) {
  InprocTransport transport;
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> a = transport.Serve("ps:1", &echo);
  ASSERT_TRUE(a.ok());
  absl::StatusOr<std::unique_ptr<Server>> b = transport.Serve("ps:1", &echo);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ((*a)->port(), 1);
  // Free again after shutdown.
  (*a)->Shutdown(absl::ZeroDuration());
  absl::StatusOr<std::unique_ptr<Server>> c = transport.Serve("ps:1", &echo);
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(InprocTransportTest, ChannelCreatedBeforeServer) {
  InprocTransport transport;
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("early:1");
  ASSERT_TRUE(channel.ok());
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("early:1", &echo);
  ASSERT_TRUE(server.ok());
  OutgoingFrame request;
  request.header = "hi";
  IncomingFrame response;
  ASSERT_TRUE((*channel)->CallSync("Echo", std::move(request), Deadline(absl::Seconds(5)), &response).ok());
  EXPECT_EQ(response.header(), "hi");
}

TEST(InprocTransportTest, FramesAreHandedOverWithoutCopy) {
  InprocTransport transport;
  const void* seen = nullptr;
  FunctionHandler handler([&](std::string_view, IncomingFrame request, Responder respond) {
    request
        .Consume(request.remaining(),
                 [&](const char* d, size_t) {
                   if (seen == nullptr) seen = d;
                 })
        .IgnoreError();
    respond(absl::OkStatus(), {});
  });
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("zc:1", &handler);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("zc:1");
  auto data = std::make_shared<std::string>(Bytes(4096, 1));
  OutgoingFrame request;
  request.chunks.push_back({data->data(), data->size(), data});
  ASSERT_TRUE((*channel)->CallSync("X", std::move(request), Deadline(absl::Seconds(5)), nullptr).ok());
  EXPECT_EQ(seen, static_cast<const void*>(data->data()));
}

TEST(InprocTransportTest, ShutdownWaitsForCallsInFlight) {
  InprocTransport transport;
  HoldingHandler holding;
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("inflight:1", &holding);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("inflight:1");
  AsyncResult result;
  OutgoingFrame request;
  request.header = "in flight";
  (*channel)->Call("Work", std::move(request), Deadline(absl::Seconds(30)), result.Callback());
  ASSERT_TRUE(holding.WaitForHeld(1));

  std::atomic<bool> shutdown_returned{false};
  std::thread shutter([&] {
    (*server)->Shutdown(absl::Seconds(20));
    shutdown_returned = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(shutdown_returned.load()) << "Shutdown returned with a call in flight";

  // New calls are refused while shutting down.
  absl::Status refused = (*channel)->CallSync("Work", OutgoingFrame(), Deadline(absl::Seconds(5)), nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;

  holding.AnswerAll();
  ASSERT_TRUE(WaitFor([&] { return shutdown_returned.load(); }, absl::Seconds(10)));
  shutter.join();
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(result.status.ok()) << result.status;
  EXPECT_EQ(result.frame.header(), "in flight");
}

TEST(InprocTransportTest, ShutdownGivesUpAfterGrace) {
  InprocTransport transport;
  HoldingHandler holding;
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("grace:1", &holding);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("grace:1");
  AsyncResult result;
  (*channel)->Call("Work", OutgoingFrame(), Deadline(absl::Seconds(30)), result.Callback());
  ASSERT_TRUE(holding.WaitForHeld(1));
  absl::Time start = absl::Now();
  (*server)->Shutdown(absl::Milliseconds(200));
  absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(150));
  EXPECT_LT(took, absl::Seconds(8));
  holding.AnswerAll();  // late answer after shutdown is harmless
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST(InprocTransportTest, ShutdownWithNothingInFlightIsQuick) {
  InprocTransport transport;
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("quick:1", &echo);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("quick:1");
  ASSERT_TRUE((*channel)->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(5)), nullptr).ok());
  absl::Time start = absl::Now();
  (*server)->Shutdown(absl::Seconds(20));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  absl::Status status = (*channel)->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(5)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

TEST(InprocTransportTest, ManyDeadlinesFireInOrder) {
  InprocTransport transport;
  HoldingHandler holding;
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve("many:1", &holding);
  ASSERT_TRUE(server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect("many:1");
  std::vector<std::unique_ptr<AsyncResult>> results;
  // A far deadline first, then near ones: the timer must not sleep past the near ones.
  results.push_back(std::make_unique<AsyncResult>());
  (*channel)->Call("W", OutgoingFrame(), Deadline(absl::Seconds(60)), results.back()->Callback());
  for (int i = 0; i < 5; ++i) {
    results.push_back(std::make_unique<AsyncResult>());
    (*channel)->Call("W", OutgoingFrame(), Deadline(absl::Milliseconds(100 + 50 * i)), results.back()->Callback());
  }
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(results[i]->done.WaitForNotificationWithTimeout(absl::Seconds(5))) << i;
    EXPECT_EQ(results[i]->status.code(), absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_FALSE(results[0]->done.HasBeenNotified());
  holding.AnswerAll();
  ASSERT_TRUE(results[0]->done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(results[0]->status.ok());
  for (auto& r : results) EXPECT_EQ(r->completions.load(), 1);
  (*server)->Shutdown(absl::Seconds(1));
}

TEST(InprocTransportTest, AnAnsweredCallsDeadlineIsNoLongerWatched) {
  InprocTransport transport;
  EchoHandler echo;
  HoldingHandler holding;
  absl::StatusOr<std::unique_ptr<Server>> echo_server = transport.Serve("answered:1", &echo);
  absl::StatusOr<std::unique_ptr<Server>> held_server = transport.Serve("held:1", &holding);
  ASSERT_TRUE(echo_server.ok() && held_server.ok());
  absl::StatusOr<std::unique_ptr<Channel>> answered = transport.Connect("answered:1");
  absl::StatusOr<std::unique_ptr<Channel>> held = transport.Connect("held:1");
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*answered)->CallSync("Echo", OutgoingFrame(), Deadline(absl::Hours(1)), nullptr).ok());
  }
  EXPECT_EQ(transport.watched_deadlines(), 0);
  AsyncResult result;
  (*held)->Call("Work", OutgoingFrame(), Deadline(absl::Hours(1)), result.Callback());
  ASSERT_TRUE(holding.WaitForHeld(1));
  EXPECT_EQ(transport.watched_deadlines(), 1);
  holding.AnswerAll();
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(transport.watched_deadlines(), 0);
}

}  // namespace
}  // namespace pstrain
