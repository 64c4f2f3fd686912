#include "common/transport/grpc/tcp_lane_server.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "common/transport/grpc/tcp_lane_connection.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

namespace asio = boost::asio;

constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
// Each connection's work runs on its own strand, so threads serve
// connections in parallel; one connection's reads and writes take turns.
int Threads() { return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)); }

// Compares without stopping at the first difference.
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

struct TcpLaneServer::Io {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::ip::tcp::acceptor acceptor{io};
};

// One client's connection: the greeting, then requests to the handler and
// their answers back.
class TcpLaneServer::Session : public TcpLaneConnection {
 public:
  Session(asio::ip::tcp::socket socket, asio::any_io_executor writer, uint64_t max_payload_bytes, Handler* handler,
          std::string secret, std::function<void()> welcomed)
      : TcpLaneConnection(std::move(socket), max_payload_bytes),
        writer_(std::move(writer)),
        handler_(handler),
        secret_(std::move(secret)),
        welcomed_(std::move(welcomed)) {}

  // Reads the greeting (within kHelloTimeout), welcomes the client, reads requests.
  void Greet() {
    auto self = std::static_pointer_cast<Session>(shared_from_this());
    asio::post(socket().get_executor(), [self] {
      self->hello_timer_ =
          std::make_unique<asio::steady_timer>(self->socket().get_executor(), absl::ToChronoNanoseconds(kHelloTimeout));
      self->hello_timer_->async_wait([self](const boost::system::error_code& error) {
        if (!error) self->Break(absl::DeadlineExceededError("no TCP lane greeting"));
      });
      asio::async_read(self->socket(), asio::buffer(self->hello_), [self](auto error, size_t) {
        if (error) return self->Break(absl::UnavailableError("closed before its greeting"));
        self->hello_timer_->cancel();
        const std::string_view hello(self->hello_, sizeof(self->hello_));
        if (hello.substr(0, kTcpLaneGreetingBytes) != kTcpLaneHello ||
            !SameSecret(hello.substr(kTcpLaneGreetingBytes), self->secret_)) {
          LOG(WARNING) << "grpc: refused a TCP lane connection: wrong greeting or secret";
          return self->Break(absl::PermissionDeniedError("wrong TCP lane greeting"));
        }
        SetTcpLaneSocketOptions(self->socket());
        self->Split(self->writer_);
        if (self->broken()) return;
        self->Send(TcpLaneMessage{std::string(kTcpLaneWelcome), {}});
        self->welcomed_();
        self->StartReading();
      });
    });
  }

 private:
  absl::Status OnHeader(const TcpLaneIncoming& message) override {
    if (message.header.kind != TcpLaneKind::kRequest) {
      return absl::InvalidArgumentError("malformed TCP lane message: an answer sent to the server");
    }
    payload_.reset(message.header.payload_bytes == 0 ? nullptr : new char[message.header.payload_bytes]);
    return absl::OkStatus();
  }

  char* Place(const TcpLaneIncoming&, size_t, uint64_t offset) override { return payload_.get() + offset; }

  void OnMessage(TcpLaneIncoming message, std::vector<IncomingFrame::Piece> pieces) override {
    const uint64_t id = message.header.call_id;
    std::weak_ptr<TcpLaneConnection> weak = shared_from_this();
    auto answered = std::make_shared<std::atomic<bool>>(false);
    handler_->Handle(message.text,
                     IncomingFrame(std::move(message.frame_header), std::move(pieces), std::move(payload_)),
                     [weak, id, answered](absl::Status status, OutgoingFrame response) {
                       if (answered->exchange(true)) return;  // answered once already
                       if (std::shared_ptr<TcpLaneConnection> session = weak.lock()) {
                         session->Send(TcpLaneMessage::Answer(id, status, std::move(response)));
                       }
                     });
  }

  void OnBroken(const absl::Status& why) override {
    if (hello_timer_ != nullptr) hello_timer_->cancel();
    VLOG(1) << "grpc: TCP lane connection closed: " << why;
  }

  const asio::any_io_executor writer_;  // the strand writes get
  Handler* const handler_;
  const std::string secret_;
  const std::function<void()> welcomed_;
  std::unique_ptr<asio::steady_timer> hello_timer_;
  char hello_[kTcpLaneGreetingBytes + kTcpLaneSecretBytes];
  std::shared_ptr<char[]> payload_;  // the request being read
};

absl::StatusOr<std::unique_ptr<TcpLaneServer>> TcpLaneServer::Listen(const std::string& host, Handler* handler,
                                                                     uint64_t max_payload_bytes) {
  auto io = std::make_unique<Io>();
  boost::system::error_code error;
  asio::ip::tcp::endpoint endpoint;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    endpoint = asio::ip::tcp::endpoint(host == "0.0.0.0" ? asio::ip::tcp::v4() : asio::ip::tcp::v6(), 0);
  } else {
    asio::ip::tcp::resolver resolver(io->io);
    auto results = resolver.resolve(host, "0", asio::ip::resolver_base::passive, error);
    if (error || results.empty()) {
      return absl::UnavailableError(absl::StrCat("TCP lane: cannot resolve ", host, ": ", error.message()));
    }
    endpoint = results.begin()->endpoint();
  }
  io->acceptor.open(endpoint.protocol(), error);
  if (!error) io->acceptor.bind(endpoint, error);
  if (!error) io->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) return absl::UnavailableError(absl::StrCat("TCP lane: cannot listen on ", host, ": ", error.message()));
  TcpLaneOffer offer = TcpLaneOffer::WithRandomSecret();
  offer.port = io->acceptor.local_endpoint().port();
  std::unique_ptr<TcpLaneServer> server(new TcpLaneServer(std::move(io), offer, handler, max_payload_bytes));
  server->Accept();
  for (int i = 0; i < Threads(); ++i) server->threads_.emplace_back([io = &server->io_->io] { io->run(); });
  return server;
}

TcpLaneServer::TcpLaneServer(std::unique_ptr<Io> io, TcpLaneOffer offer, Handler* handler, uint64_t max_payload_bytes)
    : io_(std::move(io)), offer_(std::move(offer)), handler_(handler), max_payload_bytes_(max_payload_bytes) {}

TcpLaneServer::~TcpLaneServer() { Close(); }

void TcpLaneServer::Accept() {
  io_->acceptor.async_accept(
      asio::make_strand(io_->io), [this](const boost::system::error_code& error, asio::ip::tcp::socket socket) {
        if (error == asio::error::operation_aborted) return;
        absl::MutexLock lock(&mu_);
        if (closed_) return;
        if (!error) {
          auto session = std::make_shared<Session>(std::move(socket), asio::make_strand(io_->io), max_payload_bytes_,
                                                   handler_, offer_.secret, [this] {
                                                     absl::MutexLock lock(&mu_);
                                                     ++welcomed_;
                                                   });
          std::erase_if(sessions_, [](const std::weak_ptr<Session>& s) { return s.expired(); });
          sessions_.push_back(session);
          session->Greet();
        }
        Accept();
      });
}

void TcpLaneServer::Close() {
  std::vector<std::weak_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    sessions.swap(sessions_);
  }
  asio::post(io_->io, [this] {
    boost::system::error_code ignored;
    io_->acceptor.close(ignored);
  });
  for (const std::weak_ptr<Session>& weak : sessions) {
    if (std::shared_ptr<Session> session = weak.lock()) session->Close(absl::UnavailableError("server closed"));
  }
  io_->work.reset();
  for (std::thread& thread : threads_) thread.join();
}

int TcpLaneServer::welcomed() const {
  absl::MutexLock lock(&mu_);
  return welcomed_;
}

}  // namespace pstrain
