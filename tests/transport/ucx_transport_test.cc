// The "ucx" transport beyond what every transport shares (transport_test.cc
// runs those cases over ucx too): ports, a server process killed mid-call,
// malformed active messages sent with the UCX API, UCX_* variables, a
// rendezvous-sized frame, message limits, reconnection and idling. Real UCX
// over loopback, no mocks.
//
// Some cases need a second process: they start this binary again with
// PSTRAIN_UCX_CHILD naming one of the UcxChild tests (skipped otherwise),
// which reports to the parent through a pipe (ucx_child_process.h).
#include "common/transport/ucx/ucx_transport.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/transport_test_util.h"
#include "tests/transport/ucx_child_process.h"

namespace pstrain {
namespace {

using ::pstrain::testing_util::Bytes;
using ::pstrain::testing_util::ChildProcess;
using ::pstrain::testing_util::EchoHandler;
using ::pstrain::testing_util::FunctionHandler;
using ::pstrain::testing_util::HoldingHandler;
using ::pstrain::testing_util::IsChild;
using ::pstrain::testing_util::OwnedChunk;
using ::pstrain::testing_util::ReadPayload;
using ::pstrain::testing_util::TellParent;
using ::pstrain::testing_util::TrackedChunk;
using ::pstrain::testing_util::WaitFor;
using ::testing::HasSubstr;

CallOptions Deadline(absl::Duration d) {
  CallOptions options;
  options.deadline = absl::Now() + d;
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

std::unique_ptr<Server> ServeOrDie(Transport& transport, const std::string& address, Handler* handler) {
  absl::StatusOr<std::unique_ptr<Server>> server = transport.Serve(address, handler);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<Channel> ConnectOrDie(Transport& transport, const std::string& address) {
  absl::StatusOr<std::unique_ptr<Channel>> channel = transport.Connect(address);
  EXPECT_TRUE(channel.ok()) << channel.status();
  return channel.ok() ? *std::move(channel) : nullptr;
}

std::string Local(int port) { return absl::StrCat("127.0.0.1:", port); }

// ---------------------------------------------------------------- child processes

// Child of ServerProcessKilledMidCallIsUnavailable: serves, reports its port
// and "held" when a request arrives, never answers; the parent kills it.
TEST(UcxChild, ServeAndHold) {
  if (!IsChild("ServeAndHold")) GTEST_SKIP() << "runs as a child process of another test";
  FunctionHandler hold([](std::string_view, IncomingFrame, Responder respond) {
    static std::vector<Responder>* kept = new std::vector<Responder>;  // never answered
    kept->push_back(std::move(respond));
    TellParent("held");
  });
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &hold);
  ASSERT_NE(server, nullptr);
  TellParent(absl::StrCat(server->port()));
  absl::SleepFor(absl::Seconds(120));
}

// Child of UcxTlsIsHonoured: a round trip (eager and rendezvous sizes) under
// the UCX_* variables the parent set.
TEST(UcxChild, EchoRoundTrip) {
  if (!IsChild("EchoRoundTrip")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  for (size_t size : {size_t{100}, size_t{4} << 20}) {
    const std::string payload = Bytes(size, 3);
    OutgoingFrame request;
    request.header = "tls";
    request.chunks.push_back(OwnedChunk(payload));
    IncomingFrame response;
    absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(60)), &response);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_TRUE(ReadPayload(response) == payload);
  }
  const char* tls = std::getenv("UCX_TLS");
  TellParent(absl::StrCat("ok UCX_TLS=", tls == nullptr ? "" : tls));
}

// Child of UcxTlsIsHonoured: reports what Serve says under the parent's UCX_*.
TEST(UcxChild, ReportServe) {
  if (!IsChild("ReportServe")) GTEST_SKIP() << "runs as a child process of another test";
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  absl::StatusOr<std::unique_ptr<Server>> server = transport->Serve("127.0.0.1:0", &echo);
  TellParent(server.ok() ? "serving" : server.status().ToString());
}

// ---------------------------------------------------------------- a raw UCX client

// Speaks the active-message protocol with the UCX API directly, to send what
// the transport never would. Single-threaded: every call progresses the
// worker on the calling thread.
class RawUcxClient {
 public:
  struct Answer {
    int32_t status_code = 0;
    std::string data;  // status message, or wire frame
  };

  explicit RawUcxClient(int port) {
    ucp_config_t* config = nullptr;
    EXPECT_EQ(ucp_config_read(nullptr, nullptr, &config), UCS_OK);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_AM;
    EXPECT_EQ(ucp_init(&params, config, &context_), UCS_OK);
    ucp_config_release(config);
    ucp_worker_params_t worker_params{};
    worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
    EXPECT_EQ(ucp_worker_create(context_, &worker_params, &worker_), UCS_OK);
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = ucx_wire::kAmId;
    handler.cb = &RawUcxClient::OnAm;
    handler.arg = this;
    EXPECT_EQ(ucp_worker_set_am_recv_handler(worker_, &handler), UCS_OK);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep_params.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
    ep_params.sockaddr.addr = reinterpret_cast<const sockaddr*>(&address);
    ep_params.sockaddr.addrlen = sizeof(address);
    ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
      static_cast<RawUcxClient*>(arg)->failed_ = status;
    };
    ep_params.err_handler.arg = this;
    EXPECT_EQ(ucp_ep_create(worker_, &ep_params, &ep_), UCS_OK);
  }

  ~RawUcxClient() {
    if (ep_ != nullptr) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      void* request = ucp_ep_close_nbx(ep_, &param);
      if (UCS_PTR_IS_PTR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker_);
        ucp_request_free(request);
      }
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    if (context_ != nullptr) ucp_cleanup(context_);
  }

  // Sends one active message (AM header `header`, then `data`), asking for
  // a reply endpoint; waits until UCX is done with it.
  ucs_status_t Send(const void* header, size_t header_length, const std::string& data) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    void* request = ucp_am_send_nbx(ep_, ucx_wire::kAmId, header, header_length, data.data(), data.size(), &param);
    if (request == nullptr) return UCS_OK;
    if (UCS_PTR_IS_ERR(request)) return UCS_PTR_STATUS(request);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    ucs_status_t status;
    while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS && absl::Now() < deadline) {
      ucp_worker_progress(worker_);
    }
    ucp_request_free(request);
    return status;
  }

  ucs_status_t SendRequest(ucx_wire::AmHeader header, const std::string& data) {
    return Send(&header, sizeof(header), data);
  }

  // Progresses until the answer to `call_id` arrives.
  std::optional<Answer> WaitForAnswer(uint64_t call_id, absl::Duration timeout = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (answers_.count(call_id) == 0 && absl::Now() < deadline && failed_ == UCS_OK) ucp_worker_progress(worker_);
    auto it = answers_.find(call_id);
    if (it == answers_.end()) return std::nullopt;
    return it->second;
  }

  size_t answers() const { return answers_.size(); }

 private:
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
    auto* self = static_cast<RawUcxClient*>(arg);
    ucx_wire::AmHeader h;
    if (header_length != sizeof(h) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) return UCS_OK;
    std::memcpy(&h, header, sizeof(h));
    if (h.kind != static_cast<uint16_t>(ucx_wire::Kind::kResponse)) return UCS_OK;
    self->answers_[h.call_id] = Answer{h.status_code, std::string(static_cast<const char*>(data), length)};
    return UCS_OK;
  }

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_ep_h ep_ = nullptr;
  ucs_status_t failed_ = UCS_OK;
  std::map<uint64_t, Answer> answers_;
};

ucx_wire::AmHeader RequestHeader(uint64_t call_id, uint32_t text_bytes) {
  ucx_wire::AmHeader h;
  h.kind = static_cast<uint16_t>(ucx_wire::Kind::kRequest);
  h.call_id = call_id;
  h.text_bytes = text_bytes;
  return h;
}

// ---------------------------------------------------------------- tests

TEST(UcxTransportTest, PortZeroPicksAPortAndEachServerGetsItsOwn) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> a = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  std::unique_ptr<Server> b = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_GT(a->port(), 0);
  EXPECT_GT(b->port(), 0);
  EXPECT_NE(a->port(), b->port());
  for (Server* server : {a.get(), b.get()}) {
    std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
    OutgoingFrame request;
    request.header = absl::StrCat("ping ", server->port());
    IncomingFrame response;
    ASSERT_TRUE(channel->CallSync("Ping", std::move(request), Deadline(absl::Seconds(30)), &response).ok());
    EXPECT_EQ(response.header(), absl::StrCat("ping ", server->port()));
  }
  // The port is taken: a second listener on it fails, naming the address.
  absl::StatusOr<std::unique_ptr<Server>> taken = transport->Serve(Local(a->port()), &echo);
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(std::string(taken.status().message()), HasSubstr(Local(a->port())));
}

TEST(UcxTransportTest, BadAddressesAreInvalidArgument) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  EXPECT_EQ(transport->Connect("no-port").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(transport->Connect("127.0.0.1:0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(transport->Serve("256.1.2.3:notaport", &echo).status().code(), absl::StatusCode::kInvalidArgument);
}

// A server process that dies (SIGKILL, so nothing closes its endpoints)
// while a call waits on it: the call completes with UNAVAILABLE naming the
// address once UCX notices, long before the call's deadline.
TEST(UcxTransportTest, ServerProcessKilledMidCallIsUnavailable) {
  ChildProcess child("ServeAndHold", {});
  ASSERT_TRUE(child.started());
  std::optional<std::string> port = child.ReadLine();
  ASSERT_TRUE(port.has_value()) << "the child did not start serving";
  const std::string address = absl::StrCat("127.0.0.1:", *port);
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, address);
  AsyncResult result;
  channel->Call("Hold", OutgoingFrame(), Deadline(absl::Minutes(5)), result.Callback());
  ASSERT_EQ(child.ReadLine(), "held");
  const absl::Time killed = absl::Now();
  child.Kill();
  child.Wait();
  ASSERT_TRUE(result.done.WaitForNotificationWithTimeout(absl::Seconds(60))) << "no answer a minute after the kill";
  const absl::Duration took = absl::Now() - killed;
  RecordProperty("call_status", result.status.ToString());
  RecordProperty("noticed_after", absl::FormatDuration(took));
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable) << result.status;
  EXPECT_THAT(std::string(result.status.message()), HasSubstr(address));
  EXPECT_LT(took, absl::Seconds(15)) << result.status;
  EXPECT_EQ(result.completions.load(), 1);

  // The channel reports the dead server on the next call too.
  absl::Status again = channel->CallSync("Hold", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
}

// Active messages the transport would never send, straight from the UCX
// API: none crashes the server or reaches the Handler; requests with a call
// id get INVALID_ARGUMENT; the server keeps serving.
TEST(UcxTransportTest, MalformedActiveMessagesAreRejected) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  RawUcxClient raw(server->port());

  // Dropped: a short AM header, a foreign magic, an unknown kind.
  const char short_header[3] = {1, 2, 3};
  EXPECT_EQ(raw.Send(short_header, sizeof(short_header), "Echo"), UCS_OK);
  ucx_wire::AmHeader foreign = RequestHeader(1, 4);
  foreign.magic = 0xdeadbeef;
  EXPECT_EQ(raw.SendRequest(foreign, "Echo"), UCS_OK);
  ucx_wire::AmHeader unknown = RequestHeader(2, 4);
  unknown.kind = 77;
  EXPECT_EQ(raw.SendRequest(unknown, "Echo"), UCS_OK);
  // Answered INVALID_ARGUMENT: a truncated frame, a text longer than the
  // data, another protocol version, a frame whose header length overruns.
  EXPECT_EQ(raw.SendRequest(RequestHeader(7, 4), "Echo\x85"), UCS_OK);
  EXPECT_EQ(raw.SendRequest(RequestHeader(8, 100), "Echo"), UCS_OK);
  ucx_wire::AmHeader future = RequestHeader(9, 4);
  future.version = ucx_wire::kVersion + 1;
  EXPECT_EQ(raw.SendRequest(future, "Echo" + EncodeWireHeader("h")), UCS_OK);
  EXPECT_EQ(raw.SendRequest(RequestHeader(10, 4), "Echo" + std::string("\x7f", 1) + "short"), UCS_OK);
  // And a well-formed request, to show the raw client speaks the protocol.
  EXPECT_EQ(raw.SendRequest(RequestHeader(11, 4), "Echo" + EncodeWireHeader("raw ok") + "payload"), UCS_OK);

  for (uint64_t id : {7, 8, 9, 10}) {
    SCOPED_TRACE(id);
    std::optional<RawUcxClient::Answer> answer = raw.WaitForAnswer(id);
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status_code, static_cast<int32_t>(absl::StatusCode::kInvalidArgument)) << answer->data;
    EXPECT_THAT(answer->data, HasSubstr("malformed"));
  }
  std::optional<RawUcxClient::Answer> ok = raw.WaitForAnswer(11);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status_code, 0) << ok->data;
  EXPECT_EQ(ok->data, EncodeWireHeader("raw ok") + "payload");
  EXPECT_EQ(raw.answers(), 5u) << "a dropped message was answered";
  EXPECT_EQ(echo.calls(), 1) << "a malformed message reached the handler";

  // The server still serves a regular client.
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  OutgoingFrame request;
  request.header = "still here";
  IncomingFrame response;
  ASSERT_TRUE(channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(30)), &response).ok());
  EXPECT_EQ(response.header(), "still here");
}

// A frame sent as several active messages (message_parts.h), spoken raw:
// parts arriving out of order make one request; a repeated part index or a
// part count that changes is refused as malformed and never reaches the
// handler.
TEST(UcxTransportTest, MultiPartMessagesAreAssembledOrRefused) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  RawUcxClient raw(server->port());
  auto part = [](uint64_t call_id, uint32_t index, uint32_t parts, uint32_t text_bytes) {
    ucx_wire::AmHeader h = RequestHeader(call_id, text_bytes);
    h.part = index;
    h.parts = parts;
    return h;
  };
  // Three parts, the last first: "Echo" + wire header, then two payload pieces.
  EXPECT_EQ(raw.SendRequest(part(21, 2, 3, 0), "-tail"), UCS_OK);
  EXPECT_EQ(raw.SendRequest(part(21, 0, 3, 4), "Echo" + EncodeWireHeader("in parts")), UCS_OK);
  EXPECT_EQ(raw.SendRequest(part(21, 1, 3, 0), "middle"), UCS_OK);
  // Part 0 twice.
  EXPECT_EQ(raw.SendRequest(part(22, 0, 2, 4), "Echo" + EncodeWireHeader("a")), UCS_OK);
  EXPECT_EQ(raw.SendRequest(part(22, 0, 2, 4), "Echo" + EncodeWireHeader("a")), UCS_OK);
  // Two parts that disagree on how many there are.
  EXPECT_EQ(raw.SendRequest(part(23, 0, 2, 4), "Echo" + EncodeWireHeader("b")), UCS_OK);
  EXPECT_EQ(raw.SendRequest(part(23, 1, 3, 0), "x"), UCS_OK);
  // Text outside part 0, and a part index past the count.
  EXPECT_EQ(raw.SendRequest(part(24, 1, 2, 1), "x"), UCS_OK);
  EXPECT_EQ(raw.SendRequest(part(25, 2, 2, 0), "x"), UCS_OK);

  std::optional<RawUcxClient::Answer> ok = raw.WaitForAnswer(21);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status_code, 0) << ok->data;
  EXPECT_EQ(ok->data, EncodeWireHeader("in parts") + "middle-tail");
  for (uint64_t id : {22, 23, 24, 25}) {
    SCOPED_TRACE(id);
    std::optional<RawUcxClient::Answer> answer = raw.WaitForAnswer(id);
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(answer->status_code, static_cast<int32_t>(absl::StatusCode::kInvalidArgument)) << answer->data;
    EXPECT_THAT(answer->data, HasSubstr("malformed"));
  }
  EXPECT_EQ(echo.calls(), 1) << "a malformed message reached the handler";
}

// Large and small chunks interleaved: the large ones travel as parts of
// their own, and the frame arrives in order, both ways.
TEST(UcxTransportTest, LargeAndSmallChunksInterleavedCrossInOrder) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  std::string expected;
  OutgoingFrame request;
  request.header = "interleaved";
  int seed = 1;
  for (size_t size :
       {size_t{5}, size_t{1} << 20, size_t{3}, size_t{7}, size_t{300} << 10, size_t{2} << 20, size_t{11}}) {
    std::string bytes = Bytes(size, seed++);
    expected += bytes;
    request.chunks.push_back(OwnedChunk(std::move(bytes)));
  }
  IncomingFrame response;
  absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(60)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "interleaved");
  ASSERT_EQ(response.payload_bytes(), expected.size());
  std::string got(expected.size(), '\0');
  ASSERT_TRUE(response.Read(got.data(), got.size()).ok());
  EXPECT_TRUE(got == expected) << "payload differs";
}

// UCX_* variables reach UCX: a round trip restricted to tcp works, and a
// transport list naming nothing UCX has makes UCX refuse to start, which
// Serve reports.
TEST(UcxTransportTest, UcxTlsIsHonoured) {
  {
    ChildProcess child("EchoRoundTrip", {"UCX_TLS=tcp"});
    ASSERT_TRUE(child.started());
    EXPECT_EQ(child.ReadLine(absl::Seconds(120)), "ok UCX_TLS=tcp");
    const int status = child.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child wait status " << status;
  }
  {
    ChildProcess child("ReportServe", {"UCX_TLS=no_such_transport"});
    ASSERT_TRUE(child.started());
    std::optional<std::string> line = child.ReadLine(absl::Seconds(120));
    ASSERT_TRUE(line.has_value());
    EXPECT_THAT(*line, HasSubstr("UNAVAILABLE"));
    EXPECT_THAT(*line, HasSubstr("ucp_init"));
    EXPECT_THAT(*line, HasSubstr("UCX_TLS"));
    child.Wait();
  }
}

// Far above any rendezvous threshold: the frame is pulled by
// ucp_am_recv_data_nbx into one buffer, both ways.
TEST(UcxTransportTest, Frame256MiBCrossesIntact) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  auto big = std::make_shared<std::string>(Bytes(size_t{256} << 20, 256));
  OutgoingFrame request;
  request.header = "quarter gigabyte";
  request.chunks.push_back(OwnedChunk("head"));
  request.chunks.push_back({big->data(), big->size(), big});
  IncomingFrame response;
  absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Minutes(3)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "quarter gigabyte");
  ASSERT_EQ(response.payload_bytes(), big->size() + 4);
  std::string head(4, '\0');
  ASSERT_TRUE(response.Read(head.data(), 4).ok());
  EXPECT_EQ(head, "head");
  bool same = true;
  size_t offset = 0;
  ASSERT_TRUE(response
                  .Consume(response.remaining(),
                           [&](const char* data, size_t size) {
                             same = same && std::memcmp(data, big->data() + offset, size) == 0;
                             offset += size;
                           })
                  .ok());
  EXPECT_TRUE(same) << "256 MiB payload differs";
}

// TransportOptions::max_message_bytes, on the sender (request and answer)
// and on the receiver.
TEST(UcxTransportTest, MaxMessageBytesIsEnforced) {
  TransportOptions small;
  small.max_message_bytes = 64 << 10;
  std::unique_ptr<Transport> transport = CreateUcxTransport(small);
  FunctionHandler handler([](std::string_view method, IncomingFrame request, Responder respond) {
    OutgoingFrame response;
    if (method == "Big") response.chunks.push_back(OwnedChunk(Bytes(100 << 10, 1)));
    respond(absl::OkStatus(), std::move(response));
  });
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &handler);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));

  auto released = std::make_shared<std::atomic<bool>>(false);
  OutgoingFrame too_big;
  too_big.chunks.push_back(TrackedChunk(Bytes(100 << 10, 2), released));
  absl::Status status = channel->CallSync("Small", std::move(too_big), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(WaitFor([&] { return released->load(); })) << "owner of a refused request kept";

  status = channel->CallSync("Big", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_TRUE(channel->CallSync("Small", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr).ok());

  // A client allowed more than the server: the server refuses on receipt.
  std::unique_ptr<Transport> roomy = CreateUcxTransport(TransportOptions());
  std::unique_ptr<Channel> roomy_channel = ConnectOrDie(*roomy, Local(server->port()));
  OutgoingFrame large;
  large.chunks.push_back(OwnedChunk(Bytes(1 << 20, 3)));
  status = roomy_channel->CallSync("Small", std::move(large), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
}

// A client that goes away (channel destroyed, then the whole transport)
// while the handler still holds the responder: the call completes once, and
// answering afterwards is harmless.
TEST(UcxTransportTest, AnsweringAfterTheClientWentAwayIsHarmless) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  HoldingHandler holding;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &holding);
  ASSERT_NE(server, nullptr);
  AsyncResult first;
  {
    std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
    channel->Call("Parked", OutgoingFrame(), Deadline(absl::Seconds(60)), first.Callback());
    ASSERT_TRUE(holding.WaitForHeld(1));
  }
  ASSERT_TRUE(first.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(first.status.code(), absl::StatusCode::kCancelled) << first.status;
  holding.AnswerAll();

  // The server still serves.
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  AsyncResult second;
  channel->Call("Parked", OutgoingFrame(), Deadline(absl::Seconds(60)), second.Callback());
  ASSERT_TRUE(holding.WaitForHeld(1));
  // Transport, server and channel go away with the request unanswered.
  HoldingHandler::Held held = holding.Take(0);
  channel.reset();
  server.reset();
  transport.reset();
  ASSERT_TRUE(second.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(second.status.ok());
  OutgoingFrame late;
  late.chunks.push_back(OwnedChunk("late"));
  held.respond(absl::OkStatus(), std::move(late));
  EXPECT_EQ(first.completions.load(), 1);
  EXPECT_EQ(second.completions.load(), 1);
}

// A channel whose server went away reconnects when one serves the address again.
TEST(UcxTransportTest, ChannelReconnectsToARestartedServer) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(port));
  ASSERT_TRUE(channel->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr).ok());
  server.reset();
  absl::Status down = channel->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr);
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_THAT(std::string(down.message()), HasSubstr(Local(port)));
  // The port may linger briefly after the listener closed.
  absl::StatusOr<std::unique_ptr<Server>> again = transport->Serve(Local(port), &echo);
  for (int i = 0; i < 50 && !again.ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    again = transport->Serve(Local(port), &echo);
  }
  ASSERT_TRUE(again.ok()) << again.status();
  OutgoingFrame request;
  request.header = "back";
  IncomingFrame response;
  absl::Status status = channel->CallSync("Echo", std::move(request), Deadline(absl::Seconds(30)), &response);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.header(), "back");
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

// With connections open and nothing to do, the progress thread sleeps on
// the worker's event descriptor instead of spinning.
TEST(UcxTransportTest, IdleTransportDoesNotSpin) {
  std::unique_ptr<Transport> transport = CreateUcxTransport(TransportOptions());
  EchoHandler echo;
  std::unique_ptr<Server> server = ServeOrDie(*transport, "127.0.0.1:0", &echo);
  ASSERT_NE(server, nullptr);
  std::unique_ptr<Channel> channel = ConnectOrDie(*transport, Local(server->port()));
  ASSERT_TRUE(channel->CallSync("Echo", OutgoingFrame(), Deadline(absl::Seconds(30)), nullptr).ok());
  // A pending call with a far deadline: the thread has a deadline to watch.
  HoldingHandler holding;
  std::unique_ptr<Server> parked = ServeOrDie(*transport, "127.0.0.1:0", &holding);
  std::unique_ptr<Channel> parked_channel = ConnectOrDie(*transport, Local(parked->port()));
  AsyncResult pending;
  parked_channel->Call("Parked", OutgoingFrame(), Deadline(absl::Minutes(5)), pending.Callback());
  ASSERT_TRUE(holding.WaitForHeld(1));
  const double before = CpuSeconds();
  absl::SleepFor(absl::Seconds(2));
  const double used = CpuSeconds() - before;
  EXPECT_LT(used, 0.5) << "the process used " << used << " s of CPU in 2 s of idling";
  holding.AnswerAll();
  ASSERT_TRUE(pending.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(pending.status.ok()) << pending.status;
}

}  // namespace
}  // namespace pstrain
