// The "ucx" transport between hosts that share a kernel but not a network:
// a client on one emulated host (a network namespace on a bridge,
// tools/launch/emulated_hosts.h) and its server on another, as Kubernetes
// pods and containers are, and both on one emulated host. The core cases of
// ucx_transport_test.cc across the namespace boundary: round trips (their
// latency: UCX's shared memory, which UCX 1.13 offers there, loses every
// wake-up across network namespaces, so each message waited for the
// receiver's 1 s timed wake-up), eager, rendezvous and multi-part frames
// intact, deadlines, a server killed mid-call reported UNAVAILABLE, and the
// channel reconnecting to its restarted server.
//
// Each side is this binary again (ucx_child_process.h) started with
// `ip netns exec`; the parent only orchestrates. Needs root and iproute2;
// skips saying so otherwise.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "common/transport/ucx/ucx_transport.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/in_place_echo.h"
#include "tests/transport/transport_test_util.h"
#include "tests/transport/ucx_child_process.h"
#include "tools/launch/emulated_hosts.h"

namespace pstrain {
namespace {

using ::pstrain::testing_util::Bytes;
using ::pstrain::testing_util::ChildProcess;
using ::pstrain::testing_util::EnvValue;
using ::pstrain::testing_util::IsChild;
using ::pstrain::testing_util::OwnedChunk;
using ::pstrain::testing_util::ReadPayload;
using ::pstrain::testing_util::ServeForParent;
using ::pstrain::testing_util::TellParent;
using ::testing::HasSubstr;

// Children learn their part from these.
constexpr char kServeEnv[] = "PSTRAIN_UCX_SERVE";  // the address to serve on
constexpr char kPeerEnv[] = "PSTRAIN_UCX_PEER";    // the server's address

// Round trips the latency case makes, and the most it may take for them.
// Each starts after a pause ten times the progress thread's default spin
// (PSTRAIN_UCX_SPIN_US), as a training step's first message does after
// the step's compute: both sides' progress threads sleep and must be woken
// by the message itself.
constexpr int kRoundTrips = 100;
constexpr absl::Duration kPauseBeforeTrip = absl::Milliseconds(2);
constexpr absl::Duration kRoundTripBudget = absl::Seconds(10);

CallOptions Deadline(absl::Duration d) {
  CallOptions options;
  options.deadline = absl::Now() + d;
  return options;
}

// Echoes every request; a "Hold" request is kept unanswered and reported
// to the parent ("held").
class ServeHandler : public Handler {
 public:
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    if (method == "Hold") {
      absl::MutexLock lock(&mu_);
      held_.push_back(std::move(respond));
      TellParent("held");
      return;
    }
    OutgoingFrame response;
    response.header = std::string(request.header());
    if (request.payload_bytes() > 0) response.chunks.push_back(OwnedChunk(ReadPayload(request)));
    respond(absl::OkStatus(), std::move(response));
  }

 private:
  absl::Mutex mu_;
  std::vector<Responder> held_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------- children

// Serves on PSTRAIN_UCX_SERVE, tells the parent its port, and serves until killed.
TEST(UcxChild, Serve) {
  if (!IsChild("Serve")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  ServeHandler handler;
  ServeForParent(*transport, handler, EnvValue(kServeEnv));
}

// The client's cases against the server at PSTRAIN_UCX_PEER; tells the
// parent how long the round trips took, then "done".
TEST(UcxChild, Client) {
  if (!IsChild("Client")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Channel>> made = transport->Connect(EnvValue(kPeerEnv));
  ASSERT_TRUE(made.ok()) << made.status();
  Channel& channel = **made;
  ASSERT_TRUE(channel.CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr).ok());

  // Round trips, one at a time, each after a pause: each costs a wake-up on both sides.
  std::vector<absl::Duration> took;
  const absl::Time start = absl::Now();
  while (static_cast<int>(took.size()) < kRoundTrips && absl::Now() - start < kRoundTripBudget) {
    absl::SleepFor(kPauseBeforeTrip);
    OutgoingFrame request;
    request.header = absl::StrCat("trip ", took.size());
    IncomingFrame response;
    const absl::Time sent = absl::Now();
    absl::Status status = channel.CallSync("Echo", std::move(request), Deadline(absl::Seconds(30)), &response);
    took.push_back(absl::Now() - sent);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_EQ(response.header(), absl::StrCat("trip ", took.size() - 1));
  }
  std::vector<absl::Duration> sorted = took;
  std::sort(sorted.begin(), sorted.end());
  const absl::Duration median = sorted[sorted.size() / 2];
  TellParent(absl::StrCat(took.size(), " round trips in ", absl::FormatDuration(absl::Now() - start), ", median ",
                          absl::FormatDuration(median), ", slowest ", absl::FormatDuration(sorted.back())));
  EXPECT_EQ(static_cast<int>(took.size()), kRoundTrips)
      << "round trips across hosts are slow: median " << absl::FormatDuration(median);
  EXPECT_LT(median, absl::Milliseconds(20)) << "round trips across hosts are slow";

  // Eager, rendezvous and multi-part sizes, intact both ways.
  for (size_t size : {size_t{100}, size_t{64} << 10, size_t{4} << 20, size_t{64} << 20}) {
    SCOPED_TRACE(size);
    const std::string payload = Bytes(size, static_cast<uint32_t>(size % 1000));
    OutgoingFrame request;
    request.header = "sized";
    request.chunks.push_back(OwnedChunk(payload));
    IncomingFrame response;
    absl::Status status = channel.CallSync("Echo", std::move(request), Deadline(absl::Seconds(60)), &response);
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_TRUE(ReadPayload(response) == payload) << "payload differs";
  }
  // Large and small chunks interleaved: parts of their own and I/O vectors.
  std::string expected;
  OutgoingFrame mixed;
  mixed.header = "interleaved";
  uint32_t seed = 1;
  for (size_t size : {size_t{5}, size_t{1} << 20, size_t{3}, size_t{300} << 10, size_t{11}}) {
    std::string bytes = Bytes(size, seed++);
    expected += bytes;
    mixed.chunks.push_back(OwnedChunk(std::move(bytes)));
  }
  IncomingFrame response;
  absl::Status status = channel.CallSync("Echo", std::move(mixed), Deadline(absl::Seconds(60)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_TRUE(ReadPayload(response) == expected) << "interleaved payload differs";
  // The same, received in place where the caller said (CallOptions::receive_into).
  testing_util::InPlaceRecord record;
  EXPECT_TRUE(testing_util::InPlaceEcho(channel, {5, size_t{1} << 20, size_t{300} << 10, 11}, true, &record));
  std::string placed;
  size_t placed_bytes = 0;
  for (const auto& [offset, bytes] : record.placed) {
    absl::StrAppend(&placed, " ", bytes, "@", offset);
    placed_bytes += bytes;
  }
  // However the server chunks its answer, the large bytes travel in parts of their own.
  EXPECT_GE(placed_bytes, size_t{1} << 20) << "the answer was not received in place; placed:" << placed;

  // A deadline passes while the server holds the call.
  status = channel.CallSync("Hold", OutgoingFrame(), Deadline(absl::Milliseconds(300)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(EnvValue(kPeerEnv)));
  TellParent("done");
}

// Calls "Hold" on the server at PSTRAIN_UCX_PEER, which the parent then
// kills: tells the parent the call's status; then calls with wait_for_ready
// until the parent's restarted server answers, and tells it "reconnected".
TEST(UcxChild, CallHeld) {
  if (!IsChild("CallHeld")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Channel>> made = transport->Connect(EnvValue(kPeerEnv));
  ASSERT_TRUE(made.ok()) << made.status();
  absl::Status held = (*made)->CallSync("Hold", OutgoingFrame(), Deadline(absl::Minutes(5)), nullptr);
  TellParent(held.ToString());
  CallOptions ready = Deadline(absl::Seconds(60));
  ready.wait_for_ready = true;
  OutgoingFrame request;
  request.header = "back";
  IncomingFrame response;
  absl::Status status = (*made)->CallSync("Echo", std::move(request), ready, &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "back");
  TellParent("reconnected");
}

// ---------------------------------------------------------------- the tests

class UcxAcrossHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = launch::CanEmulateHosts(); !s.ok()) GTEST_SKIP() << s.message();
    absl::StatusOr<std::unique_ptr<launch::EmulatedHosts>> hosts =
        launch::EmulatedHosts::Create({{"client"}, {"server"}}, /*subnet=*/214 * 256 + 21);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    hosts_ = *std::move(hosts);
  }

  // A server on `host` (serving on its address, port `port`; 0: any); its port.
  std::optional<std::string> StartServer(std::unique_ptr<ChildProcess>* server, int host, int port = 0) {
    *server = std::make_unique<ChildProcess>(
        "Serve", std::vector<std::string>{absl::StrCat(kServeEnv, "=", hosts_->address(host), ":", port)},
        hosts_->RunOn(host));
    if (!(*server)->started()) return std::nullopt;
    return (*server)->ReadLine();
  }

  // Runs the client cases on `client_host` against a server on `server_host`.
  void RunClientCases(int client_host, int server_host) {
    std::unique_ptr<ChildProcess> server;
    std::optional<std::string> port = StartServer(&server, server_host);
    ASSERT_TRUE(port.has_value()) << "the server did not start";
    const std::string address = absl::StrCat(hosts_->address(server_host), ":", *port);
    ChildProcess client("Client", {absl::StrCat(kPeerEnv, "=", address)}, hosts_->RunOn(client_host));
    ASSERT_TRUE(client.started());
    std::optional<std::string> trips = client.ReadLine(kRoundTripBudget + absl::Seconds(30));
    ASSERT_TRUE(trips.has_value()) << "no round trips reported";
    RecordProperty("round_trips", *trips);
    std::cout << "ucx from " << hosts_->address(client_host) << " to " << address << ": " << *trips << "\n";
    EXPECT_EQ(client.ReadLine(absl::Seconds(60)), "done");
    const std::optional<int> status = client.WaitFor(absl::Seconds(30));
    ASSERT_TRUE(status.has_value()) << "the client did not exit";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "client wait status " << *status;
  }

  std::unique_ptr<launch::EmulatedHosts> hosts_;
};

TEST_F(UcxAcrossHostsTest, CallsToAnotherHostAreFastAndIntact) { RunClientCases(/*client_host=*/0, 1); }

// Two processes of one emulated host share its network namespace: shared
// memory there works, wake-ups included.
TEST_F(UcxAcrossHostsTest, CallsWithinOneEmulatedHostAreFastAndIntact) { RunClientCases(/*client_host=*/1, 1); }

// A server on another host dies (SIGKILL: nothing closes its endpoints)
// while a call waits on it: UNAVAILABLE naming the address long before the
// deadline; a server restarted on the same port is reached again.
TEST_F(UcxAcrossHostsTest, AServerKilledOnAnotherHostIsUnavailableAndTheChannelReconnects) {
  std::unique_ptr<ChildProcess> server;
  std::optional<std::string> port = StartServer(&server, /*host=*/1);
  ASSERT_TRUE(port.has_value()) << "the server did not start";
  const std::string address = absl::StrCat(hosts_->address(1), ":", *port);
  ChildProcess client("CallHeld", {absl::StrCat(kPeerEnv, "=", address)}, hosts_->RunOn(0));
  ASSERT_TRUE(client.started());
  ASSERT_EQ(server->ReadLine(), "held");
  const absl::Time killed = absl::Now();
  server->Kill();
  server->Wait();
  std::optional<std::string> status = client.ReadLine(absl::Seconds(60));
  const absl::Duration took = absl::Now() - killed;
  ASSERT_TRUE(status.has_value()) << "no answer a minute after the kill";
  RecordProperty("noticed_after", absl::FormatDuration(took));
  EXPECT_THAT(*status, HasSubstr("UNAVAILABLE"));
  EXPECT_THAT(*status, HasSubstr(address));
  EXPECT_LT(took, absl::Seconds(15)) << *status;

  int port_number = 0;
  ASSERT_TRUE(absl::SimpleAtoi(*port, &port_number));
  std::optional<std::string> again = StartServer(&server, /*host=*/1, port_number);
  ASSERT_EQ(again, *port) << "the server could not serve its port again";
  EXPECT_EQ(client.ReadLine(absl::Seconds(60)), "reconnected");
  const std::optional<int> exit = client.WaitFor(absl::Seconds(30));
  ASSERT_TRUE(exit.has_value()) << "the client did not exit";
  EXPECT_TRUE(WIFEXITED(*exit) && WEXITSTATUS(*exit) == 0) << "client wait status " << *exit;
}

}  // namespace
}  // namespace pstrain
