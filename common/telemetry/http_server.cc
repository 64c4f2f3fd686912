#include "common/telemetry/http_server.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <exception>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "glog/logging.h"

namespace pstrain {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

constexpr uint32_t kMaxHeaderBytes = 8 * 1024;
constexpr uint64_t kMaxBodyBytes = 8 * 1024;
// After a response that closes the connection, what the client still sends
// is read and dropped (for at most this long) so that closing does not reset
// the connection before the client has read the response.
constexpr auto kMaxLinger = std::chrono::seconds(1);
// How long to wait before accepting again after accept failed (e.g. out of
// file descriptors).
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

// What every connection answers from; shared by the connections.
struct Site {
  const MetricRegistry* registry;
  HealthCheck health;
  std::chrono::steady_clock::duration io_timeout;
  std::function<bool(std::string_view, const std::string&)> authorize;  // empty: everyone
};

// Whether the site's `authorize` lets `request` from `peer` through (true
// without one).
bool Authorized(const Site& site, const Request& request, const std::string& peer) {
  if (!site.authorize) return true;
  auto header = request.find(http::field::authorization);
  if (header == request.end()) return site.authorize("", peer);
  return site.authorize(std::string_view(header->value().data(), header->value().size()), peer);
}

Response TextResponse(http::status status, unsigned version, std::string body) {
  Response response(status, version);
  response.set(http::field::server, "pstrain");
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

// Whether a read failed because the bytes received are not an acceptable
// HTTP request (the parser's errors), rather than the connection's fate.
bool IsMalformedRequest(const beast::error_code& error) {
  return error && error != http::error::end_of_stream &&
         &error.category() == &http::make_error_code(http::error::bad_method).category();
}

// The answer to one well-formed request from `peer` (for the log).
Response Answer(const Site& site, const Request& request, const std::string& peer) {
  std::string_view target(request.target().data(), request.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  Response response;
  if (!Authorized(site, request, peer)) {
    response = TextResponse(http::status::unauthorized, request.version(), "unauthorized: bearer token required\n");
    response.set(http::field::www_authenticate, "Bearer");
  } else if (path != "/metrics" && path != "/healthz") {
    response = TextResponse(http::status::not_found, request.version(), "not found\n");
  } else if (request.method() != http::verb::get) {
    response = TextResponse(http::status::method_not_allowed, request.version(), "method not allowed\n");
    response.set(http::field::allow, "GET");
  } else if (path == "/metrics") {
    response = TextResponse(http::status::ok, request.version(), site.registry->RenderText());
    response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
  } else {
    absl::Status health = site.health ? site.health() : absl::OkStatus();
    std::string reason =
        health.message().empty() ? absl::StatusCodeToString(health.code()) : std::string(health.message());
    response = health.ok() ? TextResponse(http::status::ok, request.version(), "ok\n")
                           : TextResponse(http::status::service_unavailable, request.version(), reason + "\n");
  }
  response.keep_alive(request.keep_alive());
  // The headers of an answer to HEAD describe the body a GET would have got.
  if (request.method() == http::verb::head) response.body().clear();
  return response;
}

// One client connection: read a request, answer it, repeat until the client
// closes, a deadline passes, or a request is malformed. Every handler runs on
// the connection's strand and holds the connection alive.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<const Site> site)
      : stream_(std::move(socket)), site_(std::move(site)) {}

  void Start() {
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Connection::ReadRequest, shared_from_this()));
  }

 private:
  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    stream_.expires_after(site_->io_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Connection::OnRead, shared_from_this()));
  }

  void OnRead(beast::error_code error, size_t) {
    if (error == http::error::end_of_stream) {  // the client closed between requests
      Close();
      return;
    }
    if (IsMalformedRequest(error)) {
      Send(TextResponse(http::status::bad_request, 11, absl::StrCat("bad request: ", error.message(), "\n")),
           /*close=*/true);
      return;
    }
    if (error) return;  // timeout (the stream is closed already), reset, ...
    Response response = Answer(*site_, parser_->get(), PeerAddress());
    bool close = response.need_eof();
    Send(std::move(response), close);
  }

  // The client's address (no port: one log line per host), for the log.
  std::string PeerAddress() {
    beast::error_code error;
    tcp::endpoint peer = stream_.socket().remote_endpoint(error);
    return error ? std::string("an unknown peer") : peer.address().to_string();
  }

  void Send(Response response, bool close) {
    response_ = std::move(response);
    if (close) response_.keep_alive(false);
    stream_.expires_after(site_->io_timeout);
    http::async_write(stream_, response_, beast::bind_front_handler(&Connection::OnWrite, shared_from_this(), close));
  }

  void OnWrite(bool close, beast::error_code error, size_t) {
    if (error) return;
    if (close) {
      Close();
    } else {
      ReadRequest();
    }
  }

  // Sends FIN, then drops what the client still sends until it closes too.
  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::min<std::chrono::steady_clock::duration>(site_->io_timeout, kMaxLinger));
    Drain();
  }

  void Drain() {
    stream_.async_read_some(asio::buffer(discard_), [self = shared_from_this()](beast::error_code error, size_t) {
      if (!error) self->Drain();
    });
  }

  beast::tcp_stream stream_;
  std::shared_ptr<const Site> site_;
  beast::flat_buffer buffer_;  // bytes read but not parsed yet (pipelined requests)
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  std::array<char, 4096> discard_;
};

}  // namespace

struct MetricsHttpServer::State {
  explicit State(int io_threads) : ioc(io_threads) {}

  // Accepts connections until the io_context stops.
  void Accept() {
    acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code error, tcp::socket socket) {
      if (error == asio::error::operation_aborted) return;
      if (error) {
        LOG_EVERY_N(WARNING, 100) << "metrics server: accept failed: " << error.message();
        accept_retry.expires_after(kAcceptRetryDelay);
        accept_retry.async_wait([this](beast::error_code) { Accept(); });
        return;
      }
      std::make_shared<Connection>(std::move(socket), site)->Start();
      Accept();
    });
  }

  void Run() {
    for (;;) {
      try {
        ioc.run();
        return;
      } catch (const std::exception& e) {
        LOG(ERROR) << "metrics server: " << e.what();
      }
    }
  }

  // Destroyed in reverse: the io_context last, after everything using it.
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  asio::steady_timer accept_retry{ioc};
  std::shared_ptr<const Site> site;
  std::vector<std::thread> threads;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host, int port,
                                                                            const MetricRegistry* registry,
                                                                            HealthCheck health,
                                                                            const MetricsHttpServerOptions& options) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrFormat("metrics_port %d: not a port (0..65535)", port));
  }
  if (registry == nullptr) return absl::InvalidArgumentError("metrics server: no registry");
  if (options.io_threads < 1 || options.io_threads > 16) {
    return absl::InvalidArgumentError(absl::StrFormat("metrics server: io_threads %d (1..16)", options.io_threads));
  }
  if (options.io_timeout <= absl::ZeroDuration() || options.io_timeout > absl::Hours(24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics server: io_timeout ", absl::FormatDuration(options.io_timeout), " (0 < it <= 24h)"));
  }
  auto state = std::make_unique<State>(options.io_threads);
  auto site = std::make_shared<Site>();
  site->registry = registry;
  site->health = std::move(health);
  site->io_timeout = absl::ToChronoNanoseconds(options.io_timeout);
  site->authorize = options.authorize;
  state->site = std::move(site);

  beast::error_code error;
  tcp::endpoint endpoint(asio::ip::make_address(host, error), static_cast<unsigned short>(port));
  if (error) {
    tcp::resolver resolver(state->ioc);
    auto results = resolver.resolve(host, std::to_string(port), error);
    if (error || results.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat("metrics server: host \"%s\" does not resolve: %s", host,
                                                        error ? error.message() : "no address"));
    }
    endpoint = results.begin()->endpoint();
  }

  tcp::acceptor& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), error);
  if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
  if (!error) acceptor.bind(endpoint, error);
  if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error == asio::error::address_in_use) {
    return absl::UnavailableError(absl::StrFormat("metrics_port %d: address already in use", port));
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrFormat("metrics_port %d: cannot listen on %s: %s", port, host, error.message()));
  }
  int bound_port = acceptor.local_endpoint(error).port();
  if (error) return absl::InternalError(absl::StrCat("metrics server: ", error.message()));

  state->Accept();
  for (int i = 0; i < options.io_threads; ++i) {
    state->threads.emplace_back([s = state.get()] { s->Run(); });
  }
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(state), bound_port));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<State> state, int port) : port_(port), state_(std::move(state)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  absl::MutexLock lock(&mu_);
  if (state_ == nullptr) return;
  state_->ioc.stop();
  for (std::thread& thread : state_->threads) thread.join();
  state_.reset();  // closes the listening socket and every connection
}

}  // namespace pstrain
