// The grpc transport's shared-memory path (common/transport/grpc/grpc_shm.h)
// through the Transport seam: large frames between two roles of one process,
// or two processes of one host, cross through a shared segment and arrive
// intact; small frames, a transport with it turned off, and processes on
// different emulated hosts (network namespaces on a bridge) use the socket;
// a server restarted on its port takes the next large call without an error.
// What went through shared memory is read off /proc/<pid>/maps: a lane is a
// mapping of a (deleted) /dev/shm/pstrain-* file on each side. Calls on an
// attached lane skip gRPC (they reach the handler on the lane's thread) and
// keep gRPC's promises: a deadline, an answer dropped unanswered, a server
// process that is killed; a client process that exits, or a channel
// destroyed, leaves no thread serving its lane. Answers of the server's
// SharedValues are lent, not copied: read in place by the client, in this
// process and in another, and held until the client is done with them.
#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/grpc/grpc_transport.h"
#include "common/transport/shared_values.h"
#include "common/transport/transport.h"
#include "gtest/gtest.h"
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

constexpr char kChildSuite[] = "GrpcShmChild";
constexpr char kServeEnv[] = "PSTRAIN_SHM_TEST_SERVE";  // the address a child serves on
constexpr char kPeerEnv[] = "PSTRAIN_SHM_TEST_PEER";    // the server a child calls
constexpr char kOffEnv[] = "PSTRAIN_GRPC_SHARED_MEMORY_MB";

// Mappings of lane segments in this process (each side of a lane maps it once).
int LaneMappings() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) n += absl::StrContains(line, "/dev/shm/pstrain-") ? 1 : 0;
  return n;
}

// Lane segments of this process still named in /dev/shm (a name goes once
// the server has it open).
int NamedSegments() {
  std::ifstream maps("/proc/self/maps");
  int n = 0;
  for (std::string line; std::getline(maps, line);) {
    n += absl::StrContains(line, "/dev/shm/pstrain-") && !absl::StrContains(line, "(deleted)") ? 1 : 0;
  }
  return n;
}

// The name of the thread running this.
std::string ThisThreadName() {
  char name[32] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// Echoes every request; "Maps" answers with this process's LaneMappings(),
// "Thread" with the name of the thread that handles it, "Sized" with as
// many payload bytes as its header says (Bytes(n, n)) under that name;
// "Hold" is never answered (until the handler goes), "Drop" drops its
// responder unanswered; "Values" answers as "Sized" from a buffer of this
// process's SharedValues (as a PS shard's values are), which it remembers.
class MapsEchoHandler : public Handler {
 public:
  // The buffer of the last "Values" answer, while anyone still holds it.
  std::shared_ptr<Buffer> LastValues() {
    absl::MutexLock lock(&mu_);
    return last_values_.lock();
  }
  ~MapsEchoHandler() override {
    absl::MutexLock lock(&mu_);
    for (Responder& respond : held_) respond(absl::CancelledError("the handler is gone"), {});
  }
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    OutgoingFrame response;
    if (method == "Hold") {
      absl::MutexLock lock(&mu_);
      held_.push_back(std::move(respond));
      return;
    }
    if (method == "Drop") return;
    if (method == "Maps") {
      response.header = absl::StrCat(LaneMappings());
    } else if (method == "Thread") {
      response.header = ThisThreadName();
    } else if (size_t n = 0; method == "Sized" && absl::SimpleAtoi(request.header(), &n)) {
      response.header = ThisThreadName();
      response.chunks.push_back(OwnedChunk(Bytes(n, n)));
    } else if (method == "Values" && absl::SimpleAtoi(request.header(), &n) && SharedValues::Get() != nullptr) {
      std::shared_ptr<Buffer> values = SharedValues::Get()->Allocate(n);
      const std::string bytes = Bytes(n, n);
      std::memcpy(values->data(), bytes.data(), n);
      response.chunks.push_back({values->data(), n, values});
      absl::MutexLock lock(&mu_);
      last_values_ = values;
    } else {
      response.header = std::string(request.header());
      if (request.payload_bytes() > 0) response.chunks.push_back(OwnedChunk(ReadPayload(request)));
    }
    respond(absl::OkStatus(), std::move(response));
  }

 private:
  absl::Mutex mu_;
  std::vector<Responder> held_ ABSL_GUARDED_BY(mu_);
  std::weak_ptr<Buffer> last_values_ ABSL_GUARDED_BY(mu_);
};

CallOptions Deadline(absl::Duration d, bool wait_for_ready = false) {
  CallOptions options;
  options.deadline = absl::Now() + d;
  options.wait_for_ready = wait_for_ready;
  return options;
}

// Echo calls of `sizes` bytes each (several chunks each), all in flight at
// once; the first error, or whether any answer differs.
absl::Status EchoAll(Channel& channel, const std::vector<size_t>& sizes, bool wait_for_ready = false) {
  struct Outcome {
    absl::Mutex mu;
    int pending;
    absl::Status status;
  } outcome;
  outcome.pending = static_cast<int>(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string head = Bytes(sizes[i] / 3, i), tail = Bytes(sizes[i] - sizes[i] / 3, i + 1000);
    OutgoingFrame request;
    request.header = absl::StrCat("call ", i);
    request.chunks = {OwnedChunk(head), OwnedChunk(tail)};
    channel.Call("Echo", std::move(request), Deadline(absl::Seconds(60), wait_for_ready),
                 [&outcome, expected = head + tail, i](absl::Status s, IncomingFrame response) {
                   if (s.ok() && response.header() != absl::StrCat("call ", i)) s = absl::InternalError("header");
                   if (s.ok() && ReadPayload(response) != expected) s = absl::DataLossError("payload differs");
                   absl::MutexLock lock(&outcome.mu);
                   if (outcome.status.ok()) outcome.status = s;
                   --outcome.pending;
                 });
  }
  absl::MutexLock lock(&outcome.mu);
  outcome.mu.Await(absl::Condition(
      +[](int* p) { return *p == 0; }, &outcome.pending));
  return outcome.status;
}

// A server and a client of the grpc transport in this process.
struct Pair {
  explicit Pair(const std::string& address = "127.0.0.1:0") {
    transport = CreateGrpcTransport(TransportOptions());
    absl::StatusOr<std::unique_ptr<Server>> s = transport->Serve(address, &handler);
    if (s.ok()) server = *std::move(s);
    if (server == nullptr) return;
    absl::StatusOr<std::unique_ptr<Channel>> c = transport->Connect(absl::StrCat("127.0.0.1:", server->port()));
    if (c.ok()) channel = *std::move(c);
  }
  MapsEchoHandler handler;
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Server> server;
  std::unique_ptr<Channel> channel;
};

// Lanes attach asynchronously: waits until this process maps `n` of them.
bool AwaitLaneMappings(int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (LaneMappings() != n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  return LaneMappings() == n;
}

TEST(GrpcShmTest, LargeFramesBetweenTwoRolesOfOneProcessCrossSharedMemoryIntact) {
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());  // offers the lane
  ASSERT_TRUE(AwaitLaneMappings(2)) << "no lane after a 1 MiB call: " << LaneMappings() << " mappings";
  EXPECT_EQ(NamedSegments(), 0) << "a lane's name stays in /dev/shm after the server opened it";
  // Many at once, more bytes than a lane holds: blocks are reused, or the
  // frames that find no room go through the socket; all arrive intact.
  std::vector<size_t> sizes;
  for (int i = 0; i < 48; ++i) sizes.push_back((size_t{1} << 20) * (1 + i % 4) + 4096 * i);
  absl::Status status = EchoAll(*pair.channel, sizes);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(LaneMappings(), 2) << "one lane per channel";
}

TEST(GrpcShmTest, SmallFramesOfferNoLane) {
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {0, 100, 60 << 10}).ok());
  EXPECT_EQ(LaneMappings(), 0);
}

// A Pair whose channel offers lanes of `megabytes` MiB each way
// (PSTRAIN_GRPC_SHARED_MEMORY_MB while it connects).
std::unique_ptr<Pair> PairWithLanesOf(const char* megabytes) {
  const std::string before = EnvValue(kOffEnv);
  setenv(kOffEnv, megabytes, 1);
  auto pair = std::make_unique<Pair>();
  if (before.empty()) {
    unsetenv(kOffEnv);
  } else {
    setenv(kOffEnv, before.c_str(), 1);
  }
  return pair;
}

TEST(GrpcShmTest, TurnedOffByTheEnvironmentEveryFrameUsesTheSocket) {
  std::unique_ptr<Pair> pair = PairWithLanesOf("0");
  ASSERT_NE(pair->channel, nullptr);
  absl::Status status = EchoAll(*pair->channel, {size_t{1} << 20, size_t{4} << 20});
  EXPECT_TRUE(status.ok()) << status;
  absl::SleepFor(absl::Milliseconds(200));  // an attach, were one made, would be done
  EXPECT_EQ(LaneMappings(), 0);
}

// The new server does not know the lane the client attached to the old one:
// the call goes again through the socket, and the channel attaches anew.
TEST(GrpcShmTest, AServerRestartedOnItsPortTakesTheNextLargeCallWithoutAnError) {
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  const std::string address = absl::StrCat("127.0.0.1:", pair.server->port());
  pair.server.reset();
  std::unique_ptr<Transport> other = CreateGrpcTransport(TransportOptions());
  MapsEchoHandler handler;
  absl::StatusOr<std::unique_ptr<Server>> again = other->Serve(address, &handler);
  ASSERT_TRUE(again.ok()) << again.status();
  absl::Status status = EchoAll(*pair.channel, {size_t{2} << 20}, /*wait_for_ready=*/true);
  EXPECT_TRUE(status.ok()) << status;
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  EXPECT_TRUE(AwaitLaneMappings(2)) << "no new lane: " << LaneMappings() << " mappings";
  status = EchoAll(*pair.channel, {size_t{3} << 20, size_t{1} << 20});
  EXPECT_TRUE(status.ok()) << status;
}

// Threads of this process named `name`.
int ThreadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

// Waits (up to 30 s) until `n` threads of this process serve lanes.
bool AwaitLaneServers(int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (ThreadsNamed("pstrain-lane-s") != n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  return ThreadsNamed("pstrain-lane-s") == n;
}

// The name of the thread that handled a "Thread" call on `channel`.
std::string HandlerThread(Channel& channel) {
  IncomingFrame answer;
  absl::Status status = channel.CallSync("Thread", OutgoingFrame(), Deadline(absl::Seconds(30)), &answer);
  return status.ok() ? answer.header() : status.ToString();
}

// The client attaches its lane when the server's accept comes back, after
// both ends map the segment: waits until a call on `channel` reaches the
// handler on a lane's thread, within 30 s.
bool AwaitLaneCalls(Channel& channel) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (HandlerThread(channel) != "pstrain-lane-s" && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  return HandlerThread(channel) == "pstrain-lane-s";
}

TEST(GrpcShmTest, CallsOnAnAttachedLaneReachTheHandlerWithoutGrpc) {
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  EXPECT_NE(HandlerThread(*pair.channel), "pstrain-lane-s") << "a call before any lane";
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  EXPECT_TRUE(AwaitLaneCalls(*pair.channel)) << "a small call once the lane is attached";
  // Large and small frames both ways, many in flight, through the lane's queues and blocks.
  absl::Status status =
      EchoAll(*pair.channel, {size_t{3} << 20, 100, size_t{64} << 10, (size_t{64} << 10) - 1, size_t{1} << 20, 0});
  EXPECT_TRUE(status.ok()) << status;
  std::vector<size_t> many(64, size_t{200} << 10);
  status = EchoAll(*pair.channel, many);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GrpcShmTest, ALaneCallFailsAtItsDeadlineAndAnAnswerDroppedIsAnError) {
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  ASSERT_TRUE(AwaitLaneCalls(*pair.channel));
  IncomingFrame answer;
  const absl::Time start = absl::Now();
  absl::Status held = pair.channel->CallSync("Hold", OutgoingFrame(), Deadline(absl::Milliseconds(300)), &answer);
  EXPECT_TRUE(absl::IsDeadlineExceeded(held)) << held;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20)) << "the deadline was not kept";
  absl::Status dropped = pair.channel->CallSync("Drop", OutgoingFrame(), Deadline(absl::Seconds(30)), &answer);
  EXPECT_TRUE(absl::IsInternal(dropped)) << dropped;
  EXPECT_TRUE(EchoAll(*pair.channel, {size_t{2} << 20}).ok()) << "the lane after a late and a dropped answer";
}

// Calls "Sized" for each of `sizes` at once and keeps every answer until the
// last has come (as a worker's pull of a whole model does); the first
// error, or what differs (a payload, or an answer not handled on a lane).
absl::Status SizedAnswersHeldTogether(Channel& channel, const std::vector<size_t>& sizes) {
  struct Outcome {
    absl::Mutex mu;
    int pending;
    absl::Status status;
    std::vector<IncomingFrame> held;
  } outcome;
  outcome.pending = static_cast<int>(sizes.size());
  for (size_t size : sizes) {
    OutgoingFrame request;
    request.header = absl::StrCat(size);
    channel.Call("Sized", std::move(request), Deadline(absl::Seconds(60)),
                 [&outcome](absl::Status s, IncomingFrame response) {
                   absl::MutexLock lock(&outcome.mu);
                   if (outcome.status.ok()) outcome.status = s;
                   outcome.held.push_back(std::move(response));
                   --outcome.pending;
                 });
  }
  absl::MutexLock lock(&outcome.mu);
  outcome.mu.Await(absl::Condition(
      +[](int* p) { return *p == 0; }, &outcome.pending));
  for (IncomingFrame& answer : outcome.held) {
    if (!outcome.status.ok()) break;
    const size_t n = answer.payload_bytes();
    if (answer.header() != "pstrain-lane-s") {
      outcome.status = absl::InternalError(absl::StrCat("an answer of ", n, " bytes from thread ", answer.header()));
    } else if (ReadPayload(answer) != Bytes(n, n)) {
      outcome.status = absl::DataLossError(absl::StrCat("an answer of ", n, " bytes differs"));
    }
  }
  return outcome.status;
}

// Answers that find no room in the lane's ring (its client still holds the
// earlier ones, or one is larger than the ring) come through the lane all
// the same, in slices, instead of waiting for room that never comes.
TEST(GrpcShmTest, AnswersBeyondTheRoomOfTheLaneComeThroughIt) {
  std::unique_ptr<Pair> pair = PairWithLanesOf("8");
  ASSERT_NE(pair->channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair->channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  ASSERT_TRUE(AwaitLaneCalls(*pair->channel));
  absl::Status status = SizedAnswersHeldTogether(*pair->channel, std::vector<size_t>(6, size_t{3} << 20));
  EXPECT_TRUE(status.ok()) << "six answers of 3 MiB held together, lanes of 8 MiB: " << status;
  status = SizedAnswersHeldTogether(*pair->channel, {size_t{20} << 20, size_t{3} << 20, 100});
  EXPECT_TRUE(status.ok()) << "an answer of 20 MiB, lanes of 8 MiB: " << status;
  status = EchoAll(*pair->channel, {size_t{2} << 20, size_t{5} << 20});
  EXPECT_TRUE(status.ok()) << "the lane after answers in slices: " << status;
}

// A "Values" call of `n` bytes: its answer, checked byte for byte (the
// frame is kept: a lent answer stays lent while the caller holds it).
absl::Status ValuesCall(Channel& channel, size_t n, IncomingFrame* answer) {
  OutgoingFrame request;
  request.header = absl::StrCat(n);
  absl::Status status = channel.CallSync("Values", std::move(request), Deadline(absl::Seconds(30)), answer);
  if (!status.ok()) return status;
  if (ReadPayload(*answer) != Bytes(n, n)) return absl::DataLossError("a Values answer differs");
  return absl::OkStatus();
}

TEST(GrpcShmTest, AnswersOfSharedValuesAreLentAndHeldUntilTheClientIsDone) {
  if (SharedValues::Get() == nullptr) GTEST_SKIP() << "this process has no SharedValues (memfd_create refused?)";
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  ASSERT_TRUE(AwaitLaneCalls(*pair.channel));
  IncomingFrame first, second, third;
  ASSERT_TRUE(ValuesCall(*pair.channel, size_t{1} << 20, &first).ok());
  const std::weak_ptr<Buffer> first_values = pair.handler.LastValues();
  // A copied answer lets go of the server's buffer once it is in the lane;
  // a lent one holds it while the client may read it.
  EXPECT_FALSE(first_values.expired()) << "the answer was copied, not lent";
  ASSERT_TRUE(ValuesCall(*pair.channel, size_t{3} << 20, &second).ok());
  EXPECT_FALSE(first_values.expired()) << "a lend let go while its client still held the frame";
  first = IncomingFrame();
  second = IncomingFrame();
  // The next lend finds the first two given back and lets them go.
  ASSERT_TRUE(ValuesCall(*pair.channel, size_t{1} << 20, &third).ok());
  EXPECT_TRUE(first_values.expired()) << "a lend given back is still held";
  // Small answers of shared values go inline, as every small answer does.
  IncomingFrame small;
  EXPECT_TRUE(ValuesCall(*pair.channel, 100, &small).ok());
}

// ---------------------------------------------------------------- children

// Serves on $PSTRAIN_SHM_TEST_SERVE, tells the parent its port, serves until killed.
TEST(GrpcShmChild, Serve) {
  if (!IsChild("Serve")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  MapsEchoHandler handler;
  ServeForParent(*transport, handler, EnvValue(kServeEnv));
}

// Large echo calls and a "Values" call to $PSTRAIN_SHM_TEST_PEER, then tells
// the parent "<server's lane mappings> <this process's>" and waits to be
// killed.
TEST(GrpcShmChild, Client) {
  if (!IsChild("Client")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(EnvValue(kPeerEnv));
  ASSERT_TRUE(channel.ok()) << channel.status();
  absl::Status first = EchoAll(**channel, {size_t{1} << 20}, /*wait_for_ready=*/true);
  ASSERT_TRUE(first.ok()) << first;
  absl::SleepFor(absl::Milliseconds(300));  // the attach, if the server takes it
  absl::Status status = EchoAll(**channel, {size_t{4} << 20, size_t{1} << 20, size_t{16} << 20, 100});
  ASSERT_TRUE(status.ok()) << status;
  if (LaneMappings() > 0) {
    ASSERT_TRUE(AwaitLaneCalls(**channel));
  }
  IncomingFrame values;  // lent by a server on this host, through the socket from another
  status = ValuesCall(**channel, size_t{2} << 20, &values);
  ASSERT_TRUE(status.ok()) << status;
  IncomingFrame maps;
  ASSERT_TRUE((*channel)->CallSync("Maps", OutgoingFrame(), Deadline(absl::Seconds(30)), &maps).ok());
  TellParent(absl::StrCat(maps.header(), " ", LaneMappings()));
  absl::SleepFor(absl::Minutes(2));
}

// Runs a Client child (through `prefix`) against `address`: its report.
std::optional<std::string> ClientReport(const std::string& address, const std::vector<std::string>& prefix = {}) {
  ChildProcess client("Client", {absl::StrCat(kPeerEnv, "=", address)}, prefix, kChildSuite);
  if (!client.started()) return std::nullopt;
  return client.ReadLine(absl::Seconds(120));
}

// A server process killed while a call waits on its lane: the call fails
// UNAVAILABLE (it does not wait for its far deadline), naming the exit, even
// before the dead process is reaped.
TEST(GrpcShmTest, ACallWaitingOnTheLaneOfAKilledServerFailsUnavailable) {
  ChildProcess server("Serve", {absl::StrCat(kServeEnv, "=127.0.0.1:0")}, {}, kChildSuite);
  std::optional<std::string> port = server.ReadLine();
  ASSERT_TRUE(port.has_value()) << "the server did not start";
  std::unique_ptr<Transport> transport = CreateGrpcTransport(TransportOptions());
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport->Connect(absl::StrCat("127.0.0.1:", *port));
  ASSERT_TRUE(channel.ok()) << channel.status();
  ASSERT_TRUE(EchoAll(**channel, {size_t{1} << 20}, /*wait_for_ready=*/true).ok());
  ASSERT_TRUE(AwaitLaneMappings(1));
  ASSERT_TRUE(AwaitLaneCalls(**channel));
  absl::Notification failed;
  absl::Status held;
  (*channel)->Call("Hold", OutgoingFrame(), Deadline(absl::Seconds(600)), [&](absl::Status s, IncomingFrame) {
    held = s;
    failed.Notify();
  });
  absl::SleepFor(absl::Milliseconds(200));
  server.Kill();  // not reaped yet: a zombie, as a launcher's child is until it notices
  ASSERT_TRUE(failed.WaitForNotificationWithTimeout(absl::Seconds(60))) << "the call waits for a dead server";
  EXPECT_TRUE(absl::IsUnavailable(held)) << held;
  EXPECT_TRUE(absl::StrContains(held.message(), "exited")) << held;
  server.Wait();
}

// A channel destroyed leaves no thread serving its lane behind (nor waiting
// on it at the client).
TEST(GrpcShmTest, TheServerStopsServingTheLaneOfADestroyedChannel) {
  const int before = ThreadsNamed("pstrain-lane-s");
  Pair pair;
  ASSERT_NE(pair.channel, nullptr);
  ASSERT_TRUE(EchoAll(*pair.channel, {size_t{1} << 20}).ok());
  ASSERT_TRUE(AwaitLaneMappings(2));
  ASSERT_TRUE(AwaitLaneCalls(*pair.channel));
  EXPECT_EQ(ThreadsNamed("pstrain-lane-s"), before + 1);
  const int callers = ThreadsNamed("pstrain-lane-c");
  EXPECT_GE(callers, 1);
  pair.channel.reset();
  EXPECT_EQ(ThreadsNamed("pstrain-lane-c"), callers - 1) << "the channel's lane thread outlived it";
  EXPECT_TRUE(AwaitLaneServers(before)) << "the lane of a destroyed channel is still served";
}

// A client process that exits leaves no thread serving its lane behind.
TEST(GrpcShmTest, TheServerStopsServingTheLaneOfAClientThatExited) {
  Pair pair;
  ASSERT_NE(pair.server, nullptr);
  const int before = ThreadsNamed("pstrain-lane-s");
  {
    ChildProcess client("Client", {absl::StrCat(kPeerEnv, "=127.0.0.1:", pair.server->port())}, {}, kChildSuite);
    ASSERT_TRUE(client.started());
    std::optional<std::string> report = client.ReadLine(absl::Seconds(120));
    ASSERT_EQ(report.value_or("nothing"), "1 1") << "lane mappings (server, client)";
    EXPECT_EQ(ThreadsNamed("pstrain-lane-s"), before + 1) << "no thread serves the client's lane";
    client.Kill();
    client.Wait();
  }
  EXPECT_TRUE(AwaitLaneServers(before)) << "the lane of an exited client is still served";
}

TEST(GrpcShmTest, AnotherProcessOfThisHostCrossesSharedMemory) {
  Pair pair;
  ASSERT_NE(pair.server, nullptr);
  std::optional<std::string> report = ClientReport(absl::StrCat("127.0.0.1:", pair.server->port()));
  ASSERT_TRUE(report.has_value()) << "the client child reported nothing";
  EXPECT_EQ(*report, "1 1") << "lane mappings (server, client)";
  if (SharedValues::Get() != nullptr) {
    EXPECT_NE(pair.handler.LastValues(), nullptr) << "the answer of shared values to another process was copied";
  }
}

// Emulated hosts share a kernel but not a network namespace: a client on
// another host is refused a lane (its bytes cross the link), one on the
// server's host gets one.
TEST(GrpcShmTest, ALaneIsOfferedAcrossEmulatedHostsOnlyWithinOne) {
  if (absl::Status can = launch::CanEmulateHosts(); !can.ok()) GTEST_SKIP() << can.message();
  absl::StatusOr<std::unique_ptr<launch::EmulatedHosts>> hosts =
      launch::EmulatedHosts::Create({{"client"}, {"server"}}, /*subnet=*/214 * 256 + 23);
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ChildProcess server("Serve", {absl::StrCat(kServeEnv, "=", (*hosts)->address(1), ":0")}, (*hosts)->RunOn(1),
                      kChildSuite);
  std::optional<std::string> port = server.ReadLine();
  ASSERT_TRUE(port.has_value()) << "the server did not start";
  const std::string address = absl::StrCat((*hosts)->address(1), ":", *port);
  std::optional<std::string> across = ClientReport(address, (*hosts)->RunOn(0));
  ASSERT_TRUE(across.has_value()) << "the client on the other host reported nothing";
  EXPECT_EQ(*across, "0 0") << "lane mappings (server, client) across hosts";
  std::optional<std::string> within = ClientReport(address, (*hosts)->RunOn(1));
  ASSERT_TRUE(within.has_value()) << "the client on the server's host reported nothing";
  EXPECT_EQ(*within, "1 1") << "lane mappings (server, client) within a host";
}

}  // namespace
}  // namespace pstrain
