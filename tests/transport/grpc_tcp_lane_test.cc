// The grpc transport's TCP lanes (common/transport/grpc/tcp_lane_*.h): the
// wire's header and offer, a lane's client and server on loopback (echoes,
// answers received in place, errors, deadlines, a server that closes, a
// wrong secret, malformed bytes), the transport choosing the lane once
// shared memory is off, and a client on another emulated host (network
// namespaces; needs root, skips saying so otherwise).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/transport/grpc/grpc_transport.h"
#include "common/transport/grpc/tcp_lane_client.h"
#include "common/transport/grpc/tcp_lane_connection.h"
#include "common/transport/grpc/tcp_lane_server.h"
#include "common/transport/grpc/tcp_lane_wire.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"
#include "tests/transport/ucx_child_process.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain {
namespace {

using ::pstrain::testing_util::Bytes;
using ::pstrain::testing_util::ChildProcess;
using ::pstrain::testing_util::EchoHandler;
using ::pstrain::testing_util::EnvValue;
using ::pstrain::testing_util::HoldingHandler;
using ::pstrain::testing_util::IsChild;
using ::pstrain::testing_util::OwnedChunk;
using ::pstrain::testing_util::ReadPayload;
using ::pstrain::testing_util::ServeForParent;
using ::pstrain::testing_util::TellParent;

constexpr uint64_t kMaxPayload = uint64_t{1} << 30;
constexpr char kChildSuite[] = "GrpcTcpLaneChild";
constexpr char kServeEnv[] = "PSTRAIN_TCP_LANE_TEST_SERVE";
constexpr char kPeerEnv[] = "PSTRAIN_TCP_LANE_TEST_PEER";

// ---------------------------------------------------------------- wire

TEST(TcpLaneWireTest, AHeaderParsesBackToItsFields) {
  TcpLaneHeader h;
  h.kind = TcpLaneKind::kAnswer;
  h.status_code = 5;
  h.call_id = 0x0102030405060708;
  h.text_bytes = 7;
  h.frame_header_bytes = 300;
  h.num_chunks = 2;
  h.payload_bytes = 5000;
  const std::string bytes = h.Encode();
  ASSERT_EQ(bytes.size(), kTcpLaneHeaderBytes);
  absl::StatusOr<TcpLaneHeader> back = TcpLaneHeader::Parse(bytes, kMaxPayload);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, h.kind);
  EXPECT_EQ(back->status_code, 5u);
  EXPECT_EQ(back->call_id, h.call_id);
  EXPECT_EQ(back->text_bytes, 7u);
  EXPECT_EQ(back->frame_header_bytes, 300u);
  EXPECT_EQ(back->num_chunks, 2u);
  EXPECT_EQ(back->payload_bytes, 5000u);
  EXPECT_EQ(back->meta_bytes(), 7u + 300u + 16u);
}

TEST(TcpLaneWireTest, AMalformedHeaderIsRefusedNamingWhatIsWrong) {
  TcpLaneHeader good;
  good.num_chunks = 1;
  good.payload_bytes = 100;
  auto refused = [](std::string bytes, uint64_t max = kMaxPayload) {
    absl::StatusOr<TcpLaneHeader> h = TcpLaneHeader::Parse(bytes, max);
    EXPECT_TRUE(absl::IsInvalidArgument(h.status())) << h.status();
    return std::string(h.status().message());
  };
  std::string bytes = good.Encode();
  EXPECT_NE(refused(bytes.substr(0, 39)).find("39 bytes"), std::string::npos);
  bytes[0] = 'X';
  EXPECT_NE(refused(bytes).find("magic"), std::string::npos);
  bytes = good.Encode();
  bytes[4] = 9;
  EXPECT_NE(refused(bytes).find("version 9"), std::string::npos);
  bytes = good.Encode();
  bytes[5] = 3;
  EXPECT_NE(refused(bytes).find("kind 3"), std::string::npos);
  TcpLaneHeader h = good;
  h.status_code = 17;
  EXPECT_NE(refused(h.Encode()).find("status code 17"), std::string::npos);
  h = good;
  h.status_code = 2;  // a request with a status
  EXPECT_NE(refused(h.Encode()).find("request with a status"), std::string::npos);
  h = good;
  h.text_bytes = kTcpLaneMaxTextBytes + 1;
  EXPECT_NE(refused(h.Encode()).find("text of"), std::string::npos);
  h = good;
  h.frame_header_bytes = kTcpLaneMaxFrameHeaderBytes + 1;
  EXPECT_NE(refused(h.Encode()).find("frame header of"), std::string::npos);
  h = good;
  h.num_chunks = kTcpLaneMaxChunks + 1;
  EXPECT_NE(refused(h.Encode()).find("chunks"), std::string::npos);
  EXPECT_NE(refused(good.Encode(), 99).find("over the limit of 99"), std::string::npos);
  h = good;
  h.num_chunks = 0;
  EXPECT_NE(refused(h.Encode()).find("0 chunks for a payload of 100"), std::string::npos);
}

TEST(TcpLaneWireTest, ChunkSizesMustFillThePayloadExactly) {
  const std::string meta = EncodeTcpLaneMeta("m", "hdr", {10, 20});
  absl::StatusOr<std::vector<uint64_t>> sizes = ParseTcpLaneChunkSizes(meta.substr(4), 2, 30);
  ASSERT_TRUE(sizes.ok()) << sizes.status();
  EXPECT_EQ(*sizes, (std::vector<uint64_t>{10, 20}));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTcpLaneChunkSizes(meta.substr(4), 2, 31).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTcpLaneChunkSizes(meta.substr(4), 2, 25).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTcpLaneChunkSizes(meta.substr(5), 2, 30).status()));
  const std::string zero = EncodeTcpLaneMeta("", "", {0, 30});
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTcpLaneChunkSizes(zero, 2, 30).status()));
  const std::string huge = EncodeTcpLaneMeta("", "", {~uint64_t{0}, 31});
  EXPECT_TRUE(absl::IsInvalidArgument(ParseTcpLaneChunkSizes(huge, 2, 30).status()));
}

TEST(TcpLaneWireTest, AnOfferParsesBackAndBadOnesAreRefused) {
  TcpLaneOffer offer = TcpLaneOffer::WithRandomSecret();
  offer.port = 4321;
  EXPECT_EQ(offer.secret.size(), kTcpLaneSecretBytes);
  EXPECT_NE(offer.secret, TcpLaneOffer::WithRandomSecret().secret);
  absl::StatusOr<TcpLaneOffer> back = TcpLaneOffer::Parse(offer.Encode());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->port, 4321);
  EXPECT_EQ(back->secret, offer.secret);
  for (const std::string& bad :
       {std::string("4321"), absl::StrCat("0|", offer.secret), absl::StrCat("70000|", offer.secret),
        std::string("4321|abc"), absl::StrCat("4321|", std::string(32, 'G')), absl::StrCat("x|", offer.secret)}) {
    EXPECT_TRUE(absl::IsInvalidArgument(TcpLaneOffer::Parse(bad).status())) << bad;
  }
}

TEST(TcpLaneWireTest, TheHostOfAnAddress) {
  EXPECT_EQ(TcpLaneHostOf("10.0.0.1:2222"), "10.0.0.1");
  EXPECT_EQ(TcpLaneHostOf("ipv4:10.0.0.1:2222"), "10.0.0.1");
  EXPECT_EQ(TcpLaneHostOf("[::1]:2222"), "::1");
  EXPECT_EQ(TcpLaneHostOf("dns:///ps-0.example:2222"), "ps-0.example");
  EXPECT_EQ(TcpLaneHostOf("no-port"), "");
}

// ---------------------------------------------------------------- a lane on loopback

// A lane's server on 127.0.0.1 and a client attached to it.
struct Lane {
  explicit Lane(Handler* handler) {
    absl::StatusOr<std::unique_ptr<TcpLaneServer>> s = TcpLaneServer::Listen("127.0.0.1", handler, kMaxPayload);
    if (!s.ok()) return;
    server = *std::move(s);
    client = std::make_unique<TcpLaneClient>("127.0.0.1:1", /*enabled=*/true, kMaxPayload);
    Attach(server->offer());
  }
  void Attach(const TcpLaneOffer& offer) {
    if (client->AttachDue()) client->Attached(absl::OkStatus(), offer.Encode());
  }
  bool AwaitConnected(bool want = true, absl::Duration timeout = absl::Seconds(10)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (client->connected() != want && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    return client->connected() == want;
  }
  std::unique_ptr<TcpLaneServer> server;
  std::unique_ptr<TcpLaneClient> client;
};

struct Answer {
  absl::Status status;
  IncomingFrame frame;
};

// Sends one call through `client` (which must take it); the future answer.
std::future<Answer> CallThrough(TcpLaneClient& client, const std::string& method, OutgoingFrame request,
                                CallOptions options) {
  auto promise = std::make_shared<std::promise<Answer>>();
  std::future<Answer> answer = promise->get_future();
  ResponseCallback done = [promise](absl::Status s, IncomingFrame f) { promise->set_value({s, std::move(f)}); };
  EXPECT_TRUE(client.Call(method, request, options, done)) << "the lane did not take the call";
  return answer;
}

OutgoingFrame LargeRequest(size_t n, uint32_t seed) {
  OutgoingFrame request;
  request.header = absl::StrCat("request ", seed);
  request.chunks = {OwnedChunk(Bytes(n / 3, seed)), OwnedChunk(Bytes(n - n / 3, seed + 1))};
  return request;
}

CallOptions Within(absl::Duration d) {
  CallOptions options;
  options.deadline = absl::Now() + d;
  return options;
}

TEST(TcpLaneTest, LargeRequestsAreEchoedIntactThroughTheLane) {
  EchoHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  EXPECT_EQ(lane.server->welcomed(), 1);
  const int64_t sent_before = TcpLaneCallsSent();
  std::vector<std::future<Answer>> answers;
  const std::vector<size_t> sizes = {size_t{1} << 20, 3 << 20, 100 * 1000, size_t{16} << 20};
  for (size_t i = 0; i < sizes.size(); ++i) {
    answers.push_back(CallThrough(*lane.client, "Echo", LargeRequest(sizes[i], i), Within(absl::Seconds(60))));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    Answer a = answers[i].get();
    ASSERT_TRUE(a.status.ok()) << a.status;
    EXPECT_EQ(a.frame.header(), absl::StrCat("request ", i));
    EXPECT_EQ(ReadPayload(a.frame), Bytes(sizes[i] / 3, i) + Bytes(sizes[i] - sizes[i] / 3, i + 1)) << "call " << i;
  }
  EXPECT_EQ(TcpLaneCallsSent() - sent_before, 4);
  EXPECT_EQ(handler.calls(), 4);
}

TEST(TcpLaneTest, AnAnswerIsReceivedInTheMemoryTheCallNames) {
  EchoHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  constexpr size_t n = size_t{2} << 20;
  std::string place(n - n / 3, '\0');  // the second chunk's memory
  CallOptions options = Within(absl::Seconds(30));
  options.receive_into = [&place](uint64_t offset, size_t bytes) -> void* {
    return offset == n / 3 && bytes == place.size() ? place.data() : nullptr;
  };
  Answer a = CallThrough(*lane.client, "Echo", LargeRequest(n, 7), options).get();
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(place, Bytes(n - n / 3, 8)) << "the second chunk did not land in place";
  std::vector<const char*> pieces;
  ASSERT_TRUE(a.frame.Consume(n, [&](const char* data, size_t) { pieces.push_back(data); }).ok());
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[1], place.data()) << "the answer's piece is not the memory it was received in";
}

TEST(TcpLaneTest, AFailedAnswerKeepsItsCodeAndMessage) {
  EchoHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  OutgoingFrame request = LargeRequest(1 << 20, 1);
  request.header = "5:no such key";
  Answer a = CallThrough(*lane.client, "Fail", std::move(request), Within(absl::Seconds(30))).get();
  EXPECT_TRUE(absl::IsNotFound(a.status)) << a.status;
  EXPECT_EQ(a.status.message(), "no such key");
}

TEST(TcpLaneTest, ACallPastItsDeadlineFailsAndItsLateAnswerIsDropped) {
  HoldingHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  const absl::Time start = absl::Now();
  std::future<Answer> late = CallThrough(*lane.client, "Hold", LargeRequest(1 << 20, 1), Within(absl::Seconds(1)));
  ASSERT_TRUE(handler.WaitForHeld(1));
  Answer a = late.get();
  EXPECT_TRUE(absl::IsDeadlineExceeded(a.status)) << a.status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  handler.AnswerAll();  // dropped by the client
  std::future<Answer> next = CallThrough(*lane.client, "Hold", LargeRequest(1 << 20, 2), Within(absl::Seconds(30)));
  ASSERT_TRUE(handler.WaitForHeld(1));
  handler.AnswerAll();
  Answer b = next.get();
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_EQ(b.frame.header(), "request 2");
}

TEST(TcpLaneTest, AServerThatClosesFailsTheCallsInFlightUnavailable) {
  HoldingHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  std::future<Answer> held = CallThrough(*lane.client, "Hold", LargeRequest(1 << 20, 1), Within(absl::Seconds(120)));
  ASSERT_TRUE(handler.WaitForHeld(1));
  lane.server->Close();
  Answer a = held.get();
  EXPECT_TRUE(absl::IsUnavailable(a.status)) << a.status;
  EXPECT_TRUE(lane.AwaitConnected(false));
  OutgoingFrame request = LargeRequest(1 << 20, 2);
  ResponseCallback unused = [](absl::Status, IncomingFrame) {};
  EXPECT_FALSE(lane.client->Call("Echo", request, Within(absl::Seconds(1)), unused)) << "a broken lane took a call";
  EXPECT_EQ(request.payload_bytes(), size_t{1} << 20) << "a call the lane did not take lost its request";
}

TEST(TcpLaneTest, AClientDestroyedWithACallInFlightFailsItUnavailable) {
  HoldingHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  std::future<Answer> held = CallThrough(*lane.client, "Hold", LargeRequest(1 << 20, 1), Within(absl::Seconds(120)));
  ASSERT_TRUE(handler.WaitForHeld(1));
  lane.client.reset();
  ASSERT_EQ(held.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_TRUE(absl::IsUnavailable(held.get().status));
}

TEST(TcpLaneTest, AWrongSecretIsRefusedAndTheClientStaysOffTheLane) {
  EchoHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  TcpLaneClient stranger("127.0.0.1:1", /*enabled=*/true, kMaxPayload);
  TcpLaneOffer wrong = lane.server->offer();
  wrong.secret[0] = wrong.secret[0] == 'a' ? 'b' : 'a';
  ASSERT_TRUE(stranger.AttachDue());
  stranger.Attached(absl::OkStatus(), wrong.Encode());
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(stranger.connected());
  EXPECT_EQ(lane.server->welcomed(), 1) << "the stranger was welcomed";
  OutgoingFrame request = LargeRequest(1 << 20, 1);
  ResponseCallback unused = [](absl::Status, IncomingFrame) {};
  EXPECT_FALSE(stranger.Call("Echo", request, Within(absl::Seconds(1)), unused));
}

TEST(TcpLaneTest, MalformedBytesBreakOnlyTheirConnection) {
  EchoHandler handler;
  Lane lane(&handler);
  ASSERT_NE(lane.server, nullptr);
  ASSERT_TRUE(lane.AwaitConnected());
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(lane.server->offer().port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string hello = absl::StrCat(kTcpLaneHello, lane.server->offer().secret);
  ASSERT_EQ(write(fd, hello.data(), hello.size()), static_cast<ssize_t>(hello.size()));
  char welcome[kTcpLaneGreetingBytes];
  ASSERT_EQ(read(fd, welcome, sizeof(welcome)), static_cast<ssize_t>(sizeof(welcome)));
  const std::string garbage(kTcpLaneHeaderBytes, 'x');
  ASSERT_EQ(write(fd, garbage.data(), garbage.size()), static_cast<ssize_t>(garbage.size()));
  char byte;
  EXPECT_EQ(read(fd, &byte, 1), 0) << "the server kept a connection that sent a malformed header";
  close(fd);
  Answer a = CallThrough(*lane.client, "Echo", LargeRequest(1 << 20, 3), Within(absl::Seconds(30))).get();
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(handler.calls(), 1);
}

TEST(TcpLaneTest, OnlyLargeCallsThatDoNotWaitForTheServerSuit) {
  OutgoingFrame small;
  small.chunks = {OwnedChunk(Bytes(100, 1))};
  CallOptions plain;
  EXPECT_FALSE(TcpLaneClient::Suits(small, plain));
  EXPECT_TRUE(TcpLaneClient::Suits(LargeRequest(kTcpLaneMinPayloadBytes, 1), plain));
  CallOptions placed;
  placed.receive_into = [](uint64_t, size_t) -> void* { return nullptr; };
  EXPECT_TRUE(TcpLaneClient::Suits(small, placed)) << "a pull names memory for its answer";
  CallOptions waiting = placed;
  waiting.wait_for_ready = true;
  EXPECT_FALSE(TcpLaneClient::Suits(LargeRequest(1 << 20, 1), waiting));
  TcpLaneClient off("127.0.0.1:1", /*enabled=*/false, kMaxPayload);
  EXPECT_FALSE(off.AttachDue());
}

// ---------------------------------------------------------------- through the grpc transport

// Echo calls of `n` bytes through `channel` until one went through a TCP
// lane of this process (the lane attaches in the background), checking each
// answer; whether one did within 30 s.
bool EchoUntilALaneCarries(Channel& channel, size_t n) {
  const int64_t before = TcpLaneCallsSent();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  for (uint32_t i = 0; absl::Now() < deadline; ++i) {
    OutgoingFrame request = LargeRequest(n, i);
    IncomingFrame response;
    CallOptions options = Within(absl::Seconds(30));
    options.wait_for_ready = i == 0;
    absl::Status s = channel.CallSync("Echo", std::move(request), options, &response);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return false;
    EXPECT_EQ(ReadPayload(response), Bytes(n / 3, i) + Bytes(n - n / 3, i + 1));
    if (TcpLaneCallsSent() > before + 2) return true;  // the lane carries calls, not just one
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

TEST(GrpcTcpLaneTest, WithoutSharedMemoryLargeCallsGoThroughTheLane) {
  setenv("PSTRAIN_GRPC_SHARED_MEMORY_MB", "0", 1);  // as between hosts
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  EchoHandler handler;
  absl::StatusOr<std::unique_ptr<Server>> server = transport->Serve("127.0.0.1:0", &handler);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(absl::StrCat("127.0.0.1:", (*server)->port()));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_TRUE(EchoUntilALaneCarries(**channel, size_t{1} << 20)) << "no call went through a TCP lane";
  // Small calls stay on gRPC.
  const int64_t before = TcpLaneCallsSent();
  IncomingFrame response;
  OutgoingFrame small;
  small.header = "small";
  ASSERT_TRUE((*channel)->CallSync("Echo", std::move(small), Within(absl::Seconds(10)), &response).ok());
  EXPECT_EQ(response.header(), "small");
  EXPECT_EQ(TcpLaneCallsSent(), before);
}

TEST(GrpcTcpLaneChild, Serve) {
  if (!IsChild("Serve")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  EchoHandler handler;
  ServeForParent(*transport, handler, EnvValue(kServeEnv));
}

// Echoes to $PSTRAIN_TCP_LANE_TEST_PEER until a TCP lane carries them, then
// tells the parent the calls its lanes sent.
TEST(GrpcTcpLaneChild, Client) {
  if (!IsChild("Client")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(EnvValue(kPeerEnv));
  ASSERT_TRUE(channel.ok()) << channel.status();
  EchoUntilALaneCarries(**channel, size_t{4} << 20);
  TellParent(absl::StrCat(TcpLaneCallsSent()));
  absl::SleepFor(absl::Minutes(2));
}

// Between emulated hosts (shared memory refused), large calls cross the link
// through the lane, intact.
TEST(GrpcTcpLaneTest, LargeCallsCrossBetweenEmulatedHostsThroughTheLane) {
  if (absl::Status can = launch::CanEmulateHosts(); !can.ok()) GTEST_SKIP() << can.message();
  absl::StatusOr<std::unique_ptr<launch::EmulatedHosts>> hosts =
      launch::EmulatedHosts::Create({{"client"}, {"server"}}, /*subnet=*/214 * 256 + 41);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ChildProcess server("Serve", {absl::StrCat(kServeEnv, "=", (*hosts)->address(1), ":0")}, (*hosts)->RunOn(1),
                      kChildSuite);
  std::optional<std::string> port = server.ReadLine();
  ASSERT_TRUE(port.has_value()) << "the server did not start";
  ChildProcess client("Client", {absl::StrCat(kPeerEnv, "=", (*hosts)->address(1), ":", *port)}, (*hosts)->RunOn(0),
                      kChildSuite);
  std::optional<std::string> sent = client.ReadLine(absl::Seconds(120));
  ASSERT_TRUE(sent.has_value()) << "the client on the other host reported nothing";
  int64_t calls = 0;
  ASSERT_TRUE(absl::SimpleAtoi(*sent, &calls)) << *sent;
  EXPECT_GT(calls, 2) << "no call crossed through a TCP lane";
}

}  // namespace
}  // namespace pstrain
