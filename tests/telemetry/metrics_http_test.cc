// The metric registry and its HTTP endpoint, exercised by real clients over
// loopback: a Boost.Beast client for well-formed requests, raw sockets for
// the bytes no HTTP client sends, and promtool for the exposition format.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "common/telemetry/http_server.h"
#include "common/telemetry/metric_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

struct HttpReply {
  int status = 0;
  std::string content_type;
  std::string allow;
  std::string body;
};

// One request to 127.0.0.1:port with a Boost.Beast client; fails after 10 s.
absl::StatusOr<HttpReply> Fetch(int port, std::string_view target, http::verb method = http::verb::get) {
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  beast::flat_buffer buffer;
  http::request<http::empty_body> request(method, beast::string_view(target.data(), target.size()), 11);
  request.set(http::field::host, "127.0.0.1");
  http::response_parser<http::string_body> parser;
  parser.skip(method == http::verb::head);  // an answer to HEAD has no body
  beast::error_code result;
  stream.expires_after(std::chrono::seconds(10));
  asio::ip::tcp::endpoint server(asio::ip::make_address_v4("127.0.0.1"), static_cast<unsigned short>(port));
  stream.async_connect(server, [&](beast::error_code error) {
    if (error) {
      result = error;
      return;
    }
    http::async_write(stream, request, [&](beast::error_code error, size_t) {
      if (error) {
        result = error;
        return;
      }
      http::async_read(stream, buffer, parser, [&](beast::error_code error, size_t) { result = error; });
    });
  });
  ioc.run();
  if (result) return absl::UnavailableError(absl::StrCat(std::string(target), ": ", result.message()));
  const http::response<http::string_body>& response = parser.get();
  HttpReply reply;
  reply.status = response.result_int();
  reply.content_type = std::string(response[http::field::content_type]);
  reply.allow = std::string(response[http::field::allow]);
  reply.body = response.body();
  return reply;
}

// The value of the sample line "<series> <value>" in an exposition.
std::optional<double> Sample(absl::string_view exposition, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    double value;
    if (absl::ConsumePrefix(&line, series) && absl::ConsumePrefix(&line, " ") && absl::SimpleAtod(line, &value)) {
      return value;
    }
  }
  return std::nullopt;
}

// A raw TCP connection to 127.0.0.1:port, for bytes no HTTP client sends.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~RawClient() { close(fd_); }

  bool connected() const { return connected_; }
  // False once the server has closed the connection.
  bool Send(std::string_view bytes) { return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == bytes.size(); }
  // What the server sends until it closes the connection; nullopt if it
  // is still open after 5 s.
  std::optional<std::string> ReadUntilClosed() {
    std::string received;
    char buffer[4096];
    for (;;) {
      ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n > 0) {
        received.append(buffer, n);
      } else if (n == 0 || errno == ECONNRESET) {
        return received;
      } else if (errno != EINTR) {
        return std::nullopt;  // EAGAIN: the timeout
      }
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

// ---------------------------------------------------------------------------
// The registry and the exposition format.

TEST(MetricRegistryTest, RendersFamiliesSortedWithHelpTypeAndLabels) {
  MetricRegistry registry;
  Counter* steps = *registry.RegisterCounter("pstrain_steps_total", "Steps applied.", {{"role", "ps"}, {"index", "0"}});
  Gauge* queue = *registry.RegisterGauge("pstrain_queue_length", "Requests waiting.");
  steps->Add(40);
  steps->Add();
  steps->Add();
  queue->Set(3.5);
  EXPECT_EQ(registry.RenderText(),
            "# HELP pstrain_queue_length Requests waiting.\n"
            "# TYPE pstrain_queue_length gauge\n"
            "pstrain_queue_length 3.5\n"
            "# HELP pstrain_steps_total Steps applied.\n"
            "# TYPE pstrain_steps_total counter\n"
            "pstrain_steps_total{index=\"0\",role=\"ps\"} 42\n");
}

TEST(MetricRegistryTest, SeriesOfOneNameShareOneFamily) {
  MetricRegistry registry;
  Gauge* worker0 = *registry.RegisterGauge("pstrain_step", "Current step.", {{"worker", "0"}});
  Gauge* worker1 = *registry.RegisterGauge("pstrain_step", "Current step.", {{"worker", "1"}});
  worker0->Set(7);
  worker1->Set(9);
  EXPECT_EQ(registry.RenderText(),
            "# HELP pstrain_step Current step.\n"
            "# TYPE pstrain_step gauge\n"
            "pstrain_step{worker=\"0\"} 7\n"
            "pstrain_step{worker=\"1\"} 9\n");
}

TEST(MetricRegistryTest, EscapesLabelValuesAndHelp) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.RegisterGauge("odd", "Help with \\ and\nnewline \"quoted\".", {{"path", "a\\b\"c\nd"}}).ok());
  EXPECT_EQ(registry.RenderText(),
            "# HELP odd Help with \\\\ and\\nnewline \"quoted\".\n"
            "# TYPE odd gauge\n"
            "odd{path=\"a\\\\b\\\"c\\nd\"} 0\n");
}

TEST(MetricRegistryTest, FormatsValuesAsPrometheusParsesThem) {
  MetricRegistry registry;
  const std::vector<std::pair<double, std::string>> cases = {
      {std::numeric_limits<double>::infinity(), "+Inf"},
      {-std::numeric_limits<double>::infinity(), "-Inf"},
      {std::numeric_limits<double>::quiet_NaN(), "NaN"},
      {0.1, "0.1"},
      {-2.5, "-2.5"},
      {1e300, "1e+300"},
      {123456789012345678.0, "123456789012345680"},
      {1.0 / 3, "0.3333333333333333"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Gauge* gauge = *registry.RegisterGauge("value", "A value.", {{"case", std::to_string(i)}});
    gauge->Set(cases[i].first);
  }
  std::string text = registry.RenderText();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_THAT(text, HasSubstr(absl::StrCat("value{case=\"", i, "\"} ", cases[i].second, "\n")));
  }
}

TEST(MetricRegistryTest, RejectsInvalidNamesWithTheRule) {
  MetricRegistry registry;
  for (const char* name : {"", "9lives", "has-dash", "has space", "ünicode"}) {
    absl::Status status = registry.RegisterGauge(name, "x").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("metric name \"", name, "\" is invalid")));
    EXPECT_THAT(status.message(), HasSubstr("[a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  EXPECT_TRUE(registry.RegisterGauge("ns:sub_name_0", "Colons are allowed.").ok());

  absl::Status counter = registry.RegisterCounter("pstrain_steps", "x").status();
  EXPECT_EQ(counter.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(counter.message(), "counter name \"pstrain_steps\" must end in \"_total\"");

  for (const char* label : {"__reserved", "1x", "a-b", ""}) {
    absl::Status status = registry.RegisterGauge("labelled", "x", {{label, "v"}}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << label;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("label name \"", label, "\" is invalid")));
  }
  EXPECT_EQ(registry.RegisterCallbackGauge("empty_callback", "x", {}, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing rejected was registered.
  EXPECT_EQ(registry.RenderText(),
            "# HELP ns:sub_name_0 Colons are allowed.\n"
            "# TYPE ns:sub_name_0 gauge\n"
            "ns:sub_name_0 0\n");
}

TEST(MetricRegistryTest, RejectsDuplicatesAndConflicts) {
  MetricRegistry registry;
  ASSERT_TRUE(registry.RegisterCounter("requests_total", "Requests.", {{"role", "ps"}}).ok());

  absl::Status duplicate = registry.RegisterCounter("requests_total", "Requests.", {{"role", "ps"}}).status();
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(duplicate.message(), "metric requests_total{role=\"ps\"} is already registered");

  absl::Status other_type = registry.RegisterGauge("requests_total", "Requests.", {{"role", "worker"}}).status();
  EXPECT_EQ(other_type.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other_type.message(), HasSubstr("already registered as a counter"));

  absl::Status other_help = registry.RegisterCounter("requests_total", "Other.", {{"role", "worker"}}).status();
  EXPECT_EQ(other_help.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other_help.message(), HasSubstr("other help text"));
}

TEST(MetricRegistryTest, CounterFollowsARunningTotalKeptElsewhere) {
  MetricRegistry registry;
  Counter* bytes = *registry.RegisterCounter("bytes_total", "x");
  bytes->AdvanceTo(100);
  EXPECT_EQ(bytes->value(), 100);
  bytes->AdvanceTo(250.5);
  EXPECT_EQ(bytes->value(), 250.5);
  bytes->AdvanceTo(10);  // a total that went back (a restarted source) never lowers it
  EXPECT_EQ(bytes->value(), 250.5);
  bytes->Add(1);
  bytes->AdvanceTo(300);
  EXPECT_EQ(bytes->value(), 300);
}

TEST(MetricRegistryDeathTest, CounterRefusesToGoDown) {
  MetricRegistry registry;
  Counter* counter = *registry.RegisterCounter("c_total", "x");
  EXPECT_DEATH(counter->Add(-1), "a counter only goes up");
}

// ---------------------------------------------------------------------------
// The HTTP endpoint.

class MetricsHttpTest : public ::testing::Test {
 protected:
  // Starts the server on 127.0.0.1, on a port the system picks.
  void StartServer(MetricsHttpServerOptions options = {}) {
    auto server = MetricsHttpServer::Start(
        "127.0.0.1", 0, &registry_,
        [this]() -> absl::Status {
          absl::MutexLock lock(&health_mu_);
          return health_;
        },
        options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
  }

  void SetHealth(absl::Status health) {
    absl::MutexLock lock(&health_mu_);
    health_ = std::move(health);
  }

  HttpReply MustFetch(std::string_view target, http::verb method = http::verb::get) {
    absl::StatusOr<HttpReply> reply = Fetch(server_->port(), target, method);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? *reply : HttpReply{};
  }

  MetricRegistry registry_;
  absl::Mutex health_mu_;
  absl::Status health_ ABSL_GUARDED_BY(health_mu_);
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpTest, ServesCountersGaugesAndLabels) {
  Counter* pushes =
      *registry_.RegisterCounter("pstrain_pushes_total", "Pushes applied.", {{"role", "ps"}, {"index", "0"}});
  Gauge* rate = *registry_.RegisterGauge("pstrain_learning_rate", "Learning rate.", {{"role", "worker"}});
  StartServer();
  pushes->Add(5);
  rate->Set(0.25);

  HttpReply reply = MustFetch("/metrics");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, kExpositionContentType);
  EXPECT_THAT(reply.body, HasSubstr("# HELP pstrain_pushes_total Pushes applied.\n"
                                    "# TYPE pstrain_pushes_total counter\n"
                                    "pstrain_pushes_total{index=\"0\",role=\"ps\"} 5\n"));
  EXPECT_THAT(reply.body, HasSubstr("# TYPE pstrain_learning_rate gauge\n"
                                    "pstrain_learning_rate{role=\"worker\"} 0.25\n"));

  pushes->Add(2);
  rate->Set(0.125);
  reply = MustFetch("/metrics?ignored=1");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(Sample(reply.body, "pstrain_pushes_total{index=\"0\",role=\"ps\"}"), 7);
  EXPECT_EQ(Sample(reply.body, "pstrain_learning_rate{role=\"worker\"}"), 0.125);
}

TEST_F(MetricsHttpTest, CallbackGaugesAreEvaluatedAtEveryScrape) {
  std::atomic<int> evaluations{0};
  ASSERT_TRUE(registry_
                  .RegisterCallbackGauge("pstrain_images_per_second", "Training throughput.", {{"role", "worker"}},
                                         [&] { return 100.0 * ++evaluations; })
                  .ok());
  StartServer();
  EXPECT_EQ(evaluations.load(), 0);
  EXPECT_EQ(Sample(MustFetch("/metrics").body, "pstrain_images_per_second{role=\"worker\"}"), 100);
  EXPECT_EQ(Sample(MustFetch("/metrics").body, "pstrain_images_per_second{role=\"worker\"}"), 200);
  EXPECT_EQ(evaluations.load(), 2);
}

TEST_F(MetricsHttpTest, HealthzAnswersOkOr503WithTheReason) {
  StartServer();
  HttpReply reply = MustFetch("/healthz");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "ok\n");

  SetHealth(absl::UnavailableError("sync step 41: waiting for gradients from workers [1]"));
  reply = MustFetch("/healthz");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, "sync step 41: waiting for gradients from workers [1]\n");

  SetHealth(absl::InternalError(""));
  reply = MustFetch("/healthz");
  EXPECT_EQ(reply.status, 503);
  EXPECT_EQ(reply.body, "INTERNAL\n");

  SetHealth(absl::OkStatus());
  EXPECT_EQ(MustFetch("/healthz").status, 200);
}

TEST_F(MetricsHttpTest, NoHealthCheckMeansHealthy) {
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, &registry_, nullptr);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<HttpReply> reply = Fetch((*server)->port(), "/healthz");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->status, 200);
}

TEST_F(MetricsHttpTest, WithAnAuthorizeCheckOnlyAcceptedRequestsAreAnswered) {
  MetricsHttpServerOptions options;
  std::atomic<int> asked{0};
  options.authorize = [&asked](std::string_view authorization, const std::string& peer) {
    ++asked;
    EXPECT_EQ(peer, "127.0.0.1");
    return authorization == "Bearer the-token";
  };
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, &registry_, nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status();
  // The raw answer to GET `path` with `headers` (each ending in \r\n).
  auto get = [&](const std::string& path, const std::string& headers) {
    RawClient client((*server)->port());
    EXPECT_TRUE(client.connected());
    client.Send("GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + headers + "\r\n");
    return client.ReadUntilClosed().value_or("(no answer)");
  };
  for (const char* path : {"/metrics", "/healthz", "/elsewhere"}) {
    for (const std::string& headers : {std::string(), std::string("Authorization: Bearer another\r\n"),
                                       std::string("Authorization: the-token\r\n")}) {
      const std::string answer = get(path, headers);
      EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 401")) << path << " with [" << headers << "]: " << answer;
      EXPECT_TRUE(absl::StrContains(answer, "WWW-Authenticate: Bearer")) << answer;
      EXPECT_FALSE(absl::StrContains(answer, "# TYPE")) << "no metrics without the token: " << answer;
    }
  }
  EXPECT_TRUE(absl::StartsWith(get("/healthz", "Authorization: Bearer the-token\r\n"), "HTTP/1.1 200"));
  EXPECT_TRUE(absl::StartsWith(get("/metrics", "Authorization: Bearer the-token\r\n"), "HTTP/1.1 200"));
  EXPECT_EQ(asked.load(), 11);
}

TEST_F(MetricsHttpTest, UnknownPathsAre404AndOtherMethods405) {
  StartServer();
  EXPECT_EQ(MustFetch("/").status, 404);
  EXPECT_EQ(MustFetch("/metricsx").status, 404);
  EXPECT_EQ(MustFetch("/metrics/").status, 404);
  EXPECT_EQ(MustFetch("/nope", http::verb::post).status, 404);
  for (http::verb method : {http::verb::post, http::verb::put, http::verb::delete_, http::verb::head}) {
    for (const char* path : {"/metrics", "/healthz"}) {
      HttpReply reply = MustFetch(path, method);
      EXPECT_EQ(reply.status, 405) << path << " " << http::to_string(method);
      EXPECT_EQ(reply.allow, "GET");
    }
  }
}

TEST_F(MetricsHttpTest, MalformedRequestsAre400) {
  StartServer();
  const std::vector<std::string> requests = {
      "GET /metrics HTTP/9.9\r\n\r\n",                                       // unknown version
      "GET /metrics\r\n\r\n",                                                // no version
      "G(T /metrics HTTP/1.1\r\n\r\n",                                       // not a method token
      "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",                      // bad header
      "GET /metrics HTTP/1.1\r\nContent-Length: x\r\n\r\n",                  // bad length
      "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a') + "\r\n\r\n",  // header over 8 KiB
      "GET /metrics HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",             // body over 8 KiB
  };
  for (const std::string& request : requests) {
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send(request);
    std::optional<std::string> response = client.ReadUntilClosed();
    ASSERT_TRUE(response.has_value()) << "the server kept the connection open after " << request.substr(0, 60);
    EXPECT_THAT(*response, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << request.substr(0, 60);
    EXPECT_THAT(*response, HasSubstr("\r\nConnection: close\r\n"));
    EXPECT_THAT(*response, HasSubstr("\r\nContent-Length: "));
  }
  EXPECT_EQ(MustFetch("/metrics").status, 200);
}

TEST_F(MetricsHttpTest, GarbageGets400OrACloseAndTheServerKeepsServing) {
  MetricsHttpServerOptions options;
  options.io_timeout = absl::Seconds(1);  // what is neither answered nor refused is closed by then
  StartServer(options);
  std::string binary;
  for (int i = 0; i < 2048; ++i) binary += static_cast<char>((i * 131 + 7) % 256);
  const std::vector<std::string> garbage = {
      std::string("\0\0\0\0\r\n\r\n", 8),
      "\xff\xfe\xfd\r\n\r\n",
      binary,
      binary + "\r\n\r\n",
      "\r\n\r\n\r\n\r\n",
      std::string(20000, '\n'),
      "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  // a bad chunk size
  };
  for (const std::string& bytes : garbage) {
    RawClient client(server_->port());
    ASSERT_TRUE(client.connected());
    client.Send(bytes);
    std::optional<std::string> response = client.ReadUntilClosed();
    ASSERT_TRUE(response.has_value()) << "no answer and no close within 5 s";
    if (!response->empty()) {
      EXPECT_THAT(*response, StartsWith("HTTP/1.1 400 ")) << *response;
    }
  }
  EXPECT_EQ(MustFetch("/healthz").status, 200);
  EXPECT_EQ(MustFetch("/metrics").status, 200);
}

TEST_F(MetricsHttpTest, PipelinedRequestsOnOneConnectionAreAnsweredInOrder) {
  StartServer();
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::optional<std::string> responses = client.ReadUntilClosed();
  ASSERT_TRUE(responses.has_value());
  size_t ok = responses->find("HTTP/1.1 200 OK\r\n");
  size_t not_found = responses->find("HTTP/1.1 404 Not Found\r\n");
  size_t metrics = responses->find("HTTP/1.1 200 OK\r\n", ok + 1);
  EXPECT_EQ(ok, 0);
  EXPECT_NE(not_found, std::string::npos);
  EXPECT_NE(metrics, std::string::npos);
  EXPECT_LT(not_found, metrics);
  EXPECT_THAT(responses->substr(metrics), HasSubstr(kExpositionContentType));
}

TEST_F(MetricsHttpTest, SilentAndSlowClientsAreClosedAfterTheDeadline) {
  MetricsHttpServerOptions options;
  options.io_timeout = absl::Milliseconds(300);
  options.io_threads = 1;
  StartServer(options);

  absl::Time start = absl::Now();
  RawClient silent(server_->port());
  ASSERT_TRUE(silent.connected());
  // A client that trickles a header that never ends.
  RawClient slow(server_->port());
  ASSERT_TRUE(slow.connected());
  std::atomic<bool> slow_cut_off{false};
  std::thread trickle([&] {
    slow.Send("GET /metrics HTTP/1.1\r\n");
    while (absl::Now() - start < absl::Seconds(5)) {
      if (!slow.Send("X-Slow: 1\r\n")) {
        slow_cut_off = true;
        return;
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  });
  // Meanwhile the one io thread serves others.
  EXPECT_EQ(MustFetch("/metrics").status, 200);

  std::optional<std::string> from_silent = silent.ReadUntilClosed();
  ASSERT_TRUE(from_silent.has_value()) << "a silent client was not closed";
  EXPECT_EQ(*from_silent, "");
  trickle.join();
  EXPECT_TRUE(slow_cut_off) << "a client trickling a header was not closed";
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
}

TEST_F(MetricsHttpTest, IdleKeepAliveConnectionsAreClosed) {
  MetricsHttpServerOptions options;
  options.io_timeout = absl::Milliseconds(300);
  StartServer(options);
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  std::optional<std::string> response = client.ReadUntilClosed();
  ASSERT_TRUE(response.has_value()) << "an idle keep-alive connection stayed open";
  EXPECT_THAT(*response, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(*response, HasSubstr("\r\n\r\nok\n"));
}

TEST_F(MetricsHttpTest, PortInUseIsAClearError) {
  StartServer();
  int port = server_->port();
  auto second = MetricsHttpServer::Start("127.0.0.1", port, &registry_, nullptr);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(), absl::StrCat("metrics_port ", port, ": address already in use"));

  auto everywhere = MetricsHttpServer::Start("0.0.0.0", port, &registry_, nullptr);
  ASSERT_FALSE(everywhere.ok());
  EXPECT_EQ(everywhere.status().message(), absl::StrCat("metrics_port ", port, ": address already in use"));

  // Stop releases the port at once.
  server_->Stop();
  auto again = MetricsHttpServer::Start("127.0.0.1", port, &registry_, nullptr);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->port(), port);
}

TEST_F(MetricsHttpTest, RejectsBadArguments) {
  for (int port : {-1, 65536}) {
    auto server = MetricsHttpServer::Start("127.0.0.1", port, &registry_, nullptr);
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(server.status().message(), HasSubstr(absl::StrCat("metrics_port ", port)));
  }
  EXPECT_FALSE(MetricsHttpServer::Start("127.0.0.1", 0, nullptr, nullptr).ok());
  MetricsHttpServerOptions no_threads;
  no_threads.io_threads = 0;
  EXPECT_FALSE(MetricsHttpServer::Start("127.0.0.1", 0, &registry_, nullptr, no_threads).ok());
  MetricsHttpServerOptions no_timeout;
  no_timeout.io_timeout = absl::InfiniteDuration();
  EXPECT_FALSE(MetricsHttpServer::Start("127.0.0.1", 0, &registry_, nullptr, no_timeout).ok());
}

TEST_F(MetricsHttpTest, StopClosesConnectionsAndIsIdempotent) {
  StartServer();
  RawClient idle(server_->port());
  ASSERT_TRUE(idle.connected());
  EXPECT_EQ(MustFetch("/healthz").status, 200);
  int port = server_->port();
  server_->Stop();
  server_->Stop();
  std::optional<std::string> from_idle = idle.ReadUntilClosed();
  ASSERT_TRUE(from_idle.has_value()) << "a connection outlived Stop()";
  EXPECT_FALSE(RawClient(port).connected());
  server_.reset();
}

TEST_F(MetricsHttpTest, ManyConcurrentScrapesWhileMetricsChange) {
  Counter* steps = *registry_.RegisterCounter("pstrain_steps_total", "Steps.", {{"role", "worker"}});
  Gauge* loss = *registry_.RegisterGauge("pstrain_loss", "Loss.", {{"role", "worker"}});
  std::atomic<int64_t> step_source{0};
  ASSERT_TRUE(registry_
                  .RegisterCallbackGauge("pstrain_step", "Step.", {{"role", "worker"}},
                                         [&] { return static_cast<double>(step_source.load()); })
                  .ok());
  MetricsHttpServerOptions options;
  options.io_threads = 2;
  StartServer(options);

  // Updaters run until every scrape is done, so scrapes and updates overlap.
  constexpr int kUpdaters = 3;
  constexpr int kScrapers = 4;
  constexpr int kScrapesPerScraper = 25;
  std::atomic<bool> scraping_done{false};
  std::atomic<int64_t> adds{0};
  std::vector<std::thread> updaters;
  for (int u = 0; u < kUpdaters; ++u) {
    updaters.emplace_back([&, u] {
      for (int i = 0; !scraping_done || i < 1000; ++i) {
        steps->Add();
        adds.fetch_add(1);
        loss->Set(u + i * 1e-3);
        step_source.fetch_add(1);
        if (i % 100 == 0) absl::SleepFor(absl::Microseconds(50));  // leave the scrapers some CPU
        // Registering while others scrape: new series appear, none vanish.
        if (i % 1000 == 0 && i < 5000) {
          ASSERT_TRUE(registry_.RegisterGauge("pstrain_extra", "Extra.", {{"n", absl::StrCat(u, "_", i)}}).ok());
        }
      }
    });
  }
  std::atomic<int> good_scrapes{0};
  std::vector<std::thread> scrapers;
  for (int s = 0; s < kScrapers; ++s) {
    scrapers.emplace_back([&] {
      double last_steps = 0;
      for (int i = 0; i < kScrapesPerScraper; ++i) {
        absl::StatusOr<HttpReply> reply = Fetch(server_->port(), "/metrics");
        ASSERT_TRUE(reply.ok()) << reply.status();
        ASSERT_EQ(reply->status, 200);
        std::optional<double> now = Sample(reply->body, "pstrain_steps_total{role=\"worker\"}");
        ASSERT_TRUE(now.has_value()) << reply->body;
        EXPECT_GE(*now, last_steps) << "a counter went down between scrapes";
        last_steps = *now;
        ASSERT_TRUE(Sample(reply->body, "pstrain_loss{role=\"worker\"}").has_value());
        ASSERT_TRUE(Sample(reply->body, "pstrain_step{role=\"worker\"}").has_value());
        ++good_scrapes;
      }
    });
  }
  for (std::thread& thread : scrapers) thread.join();
  scraping_done = true;
  for (std::thread& thread : updaters) thread.join();
  EXPECT_EQ(good_scrapes.load(), kScrapers * kScrapesPerScraper);

  std::string final_body = MustFetch("/metrics").body;
  EXPECT_EQ(Sample(final_body, "pstrain_steps_total{role=\"worker\"}"), adds.load());
  EXPECT_EQ(Sample(final_body, "pstrain_step{role=\"worker\"}"), adds.load());
  EXPECT_EQ(Sample(final_body, "pstrain_extra{n=\"2_0\"}"), 0);
}

// ---------------------------------------------------------------------------
// promtool (Debian package prometheus) judges the exposition format.

std::optional<std::string> FindPromtool() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin", ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/promtool");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// The exit status of `promtool check metrics` reading `exposition` on stdin.
int PromtoolCheck(const std::string& promtool, const std::string& exposition) {
  FILE* pipe = popen(absl::StrCat(promtool, " check metrics").c_str(), "w");
  if (pipe == nullptr) return -1;
  fwrite(exposition.data(), 1, exposition.size(), pipe);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(MetricsHttpTest, PromtoolAcceptsALiveScrape) {
  std::optional<std::string> promtool = FindPromtool();
  if (!promtool) GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  // A canary: promtool must reject a broken exposition, or this test checks nothing.
  ASSERT_NE(PromtoolCheck(*promtool, "# TYPE broken_total counter\nbroken_total{ 1\n"), 0);

  const MetricLabels role = {{"role", "ps"}, {"index", "0"}};
  (*registry_.RegisterCounter("pstrain_pushes_total", "Pushes applied by the shard.", role))->Add(12);
  (*registry_.RegisterCounter("pstrain_received_bytes_total", "Bytes received.", role))->Add(1.5e12);
  (*registry_.RegisterGauge("pstrain_loss", "Loss of the last step.", role))->Set(0.6931471805599453);
  (*registry_.RegisterGauge("pstrain_odd_value", "Values, odd ones too.", {{"kind", "inf"}}))
      ->Set(std::numeric_limits<double>::infinity());
  (*registry_.RegisterGauge("pstrain_odd_value", "Values, odd ones too.", {{"kind", "minus_inf"}}))
      ->Set(-std::numeric_limits<double>::infinity());
  (*registry_.RegisterGauge("pstrain_odd_value", "Values, odd ones too.", {{"kind", "nan"}}))
      ->Set(std::numeric_limits<double>::quiet_NaN());
  (*registry_.RegisterGauge("pstrain_odd_value", "Values, odd ones too.", {{"kind", "tiny"}}))->Set(1e-300);
  (*registry_.RegisterGauge("pstrain_odd_value", "Values, odd ones too.", {{"kind", "escapes"}, {"v", "a\\b\"c\nd"}}))
      ->Set(-1);
  (*registry_.RegisterGauge("pstrain_help_escapes", "Help with a \\ backslash\nand a newline."))->Set(1);
  ASSERT_TRUE(
      registry_.RegisterCallbackGauge("pstrain_images_per_second", "Training throughput.", role, [] { return 1234.5; })
          .ok());
  StartServer();

  HttpReply reply = MustFetch("/metrics");
  ASSERT_EQ(reply.status, 200);
  EXPECT_THAT(reply.body, HasSubstr("pstrain_odd_value{kind=\"nan\"} NaN\n"));
  EXPECT_THAT(reply.body, HasSubstr("pstrain_odd_value{kind=\"inf\"} +Inf\n"));
  EXPECT_EQ(PromtoolCheck(*promtool, reply.body), 0) << reply.body;
}

}  // namespace
}  // namespace pstrain
