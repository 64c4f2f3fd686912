#include "common/transport/grpc/tcp_lane_client.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/asio/buffer.hpp"
#include "boost/asio/connect.hpp"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/post.hpp"
#include "boost/asio/read.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "boost/asio/write.hpp"
#include "common/environment.h"
#include "common/transport/grpc/tcp_lane_connection.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

namespace asio = boost::asio;
using Clock = asio::steady_timer::clock_type;

constexpr absl::Duration kConnectTimeout = absl::Seconds(5);
constexpr absl::Duration kRetryAfter = absl::Seconds(1);
constexpr int kMaxConnectFailures = 3;  // then the channel stays on gRPC

std::atomic<int64_t> calls_sent{0};

Clock::time_point SteadyFromAbsl(absl::Time t) {
  return Clock::now() + absl::ToChronoNanoseconds(std::max(t - absl::Now(), absl::ZeroDuration()));
}

}  // namespace

int64_t TcpLaneCallsSent() { return calls_sent.load(std::memory_order_relaxed); }

bool TcpLanesFromEnvironment() {
  static const bool on = SwitchFromEnvironment("PSTRAIN_GRPC_TCP_LANE", true);
  return on;
}

// ---- one connection and its calls ----

class TcpLaneClient::Connection : public TcpLaneConnection {
 public:
  // `writer`: the strand its writes get once connected.
  Connection(asio::ip::tcp::socket socket, asio::any_io_executor writer, uint64_t max_payload_bytes,
             std::weak_ptr<Lane> lane, std::string address)
      : TcpLaneConnection(std::move(socket), max_payload_bytes),
        writer_(std::move(writer)),
        lane_(std::move(lane)),
        address_(std::move(address)) {}

  // Connects to `endpoints`, greets with `secret`, and reports to `done`
  // (on the strand) whether the server welcomed it; then reads answers.
  void Dial(const asio::ip::tcp::resolver::results_type& endpoints, std::string secret,
            std::function<void(absl::Status)> done);
  // Sends one call; completes it with UNAVAILABLE if the connection is broken.
  void Start(std::string_view method, OutgoingFrame request, const CallOptions& options, ResponseCallback done);

 private:
  struct Pending {
    ResponseCallback done;
    PayloadDestination receive_into;
    std::unique_ptr<asio::steady_timer> timer;
    bool expired = false;  // its deadline passed while its answer was arriving
  };

  absl::Status OnHeader(const TcpLaneIncoming& message) override;
  char* Place(const TcpLaneIncoming& message, size_t index, uint64_t offset) override;
  void OnMessage(TcpLaneIncoming message, std::vector<IncomingFrame::Piece> pieces) override;
  void OnBroken(const absl::Status& why) override;
  void Register(uint64_t id, const CallOptions& options, ResponseCallback done);
  void Expire(uint64_t id);
  // Removes call `id` and runs its callback with `status` (and `frame`).
  void Complete(uint64_t id, absl::Status status, IncomingFrame frame = {});

  const asio::any_io_executor writer_;
  const std::weak_ptr<Lane> lane_;
  const std::string address_;
  std::atomic<uint64_t> next_id_{1};
  // On the strand:
  std::map<uint64_t, Pending> calls_;
  uint64_t receiving_ = 0;           // the call whose answer is being read; 0: none
  std::shared_ptr<char[]> scratch_;  // the payload bytes of the answer being read that go nowhere else
  std::unique_ptr<asio::steady_timer> dial_timer_;
  std::unique_ptr<asio::steady_timer> grace_timer_;
  char welcome_[kTcpLaneGreetingBytes];
};

// ---- the lane ----

class TcpLaneClient::Lane : public std::enable_shared_from_this<Lane> {
 public:
  Lane(std::string address, std::string host, uint64_t max_payload_bytes)
      : address_(std::move(address)), host_(std::move(host)), max_payload_bytes_(max_payload_bytes) {}

  // The owner goes: break the connection, let the thread end.
  void Shutdown() {
    std::shared_ptr<Connection> connection;
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      state_ = State::kRefused;
      connection = std::move(connection_);
      if (dialing_ != nullptr) connection = std::move(dialing_);
      threads.swap(threads_);
    }
    if (threads.empty()) return;  // never connected
    if (connection != nullptr) {
      connection->Close(absl::UnavailableError(absl::StrCat("the channel to ", address_, " was closed")));
    }
    work_.reset();
    const bool own = std::any_of(threads.begin(), threads.end(),
                                 [](const std::thread& t) { return t.get_id() == std::this_thread::get_id(); });
    for (std::thread& thread : threads) {
      if (own) {
        thread.detach();  // they end once their handlers have run
      } else {
        thread.join();
      }
    }
  }

  bool AttachDue() {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kIdle || absl::Now() < retry_after_) return false;
    state_ = State::kAttaching;
    return true;
  }

  void Attached(const absl::Status& status, std::string_view text) {
    absl::StatusOr<TcpLaneOffer> offer = status.ok() ? TcpLaneOffer::Parse(text) : status;
    absl::MutexLock lock(&mu_);
    if (state_ != State::kAttaching) return;
    if (absl::IsUnimplemented(status)) {
      state_ = State::kRefused;  // this server has no lanes
      VLOG(1) << "grpc: " << address_ << " offers no TCP lane: " << status.message();
    } else if (!offer.ok()) {
      Retry(absl::StrCat("attaching: ", offer.status().ToString()));
    } else {
      state_ = State::kConnecting;
      Connect(*std::move(offer));
    }
  }

  bool Call(std::string_view method, OutgoingFrame& request, const CallOptions& options, ResponseCallback& done) {
    std::shared_ptr<Connection> connection;
    {
      absl::MutexLock lock(&mu_);
      if (state_ != State::kConnected) return false;
      connection = connection_;
    }
    connection->Start(method, std::move(request), options, std::move(done));
    calls_sent.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  bool connected() const {
    absl::MutexLock lock(&mu_);
    return state_ == State::kConnected;
  }

  // `connection` broke (or never came up).
  void Lost(const Connection* connection, const absl::Status& why) {
    absl::MutexLock lock(&mu_);
    if (connection_.get() == connection) {
      connection_.reset();
      LOG(WARNING) << "grpc: TCP lane to " << address_ << " lost (" << why.message()
                   << "); large calls go through gRPC until it is attached again";
      state_ = State::kIdle;
      retry_after_ = absl::Now() + kRetryAfter;
    } else if (dialing_.get() == connection) {
      dialing_.reset();
      Retry(absl::StrCat("connecting: ", why.message()));
    }
  }

 private:
  enum class State { kIdle, kAttaching, kConnecting, kConnected, kRefused };

  // Attach again after kRetryAfter, or never after kMaxConnectFailures.
  void Retry(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (state_ == State::kRefused) return;
    if (++failures_ >= kMaxConnectFailures) {
      state_ = State::kRefused;
      LOG(WARNING) << "grpc: no TCP lane to " << address_ << " (" << what << ", " << failures_
                   << " times); its large calls stay on gRPC";
      return;
    }
    state_ = State::kIdle;
    retry_after_ = absl::Now() + kRetryAfter;
  }

  void Connect(TcpLaneOffer offer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    boost::system::error_code error;
    asio::ip::tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve(host_, std::to_string(offer.port), error);
    if (error) return Retry(absl::StrCat("resolving ", host_, ": ", error.message()));
    // Two threads: one end of a lane sends and receives at once.
    for (int i = threads_.size(); i < 2; ++i) threads_.emplace_back([self = shared_from_this()] { self->io_.run(); });
    auto connection =
        std::make_shared<Connection>(asio::ip::tcp::socket(asio::make_strand(io_)), asio::make_strand(io_),
                                     max_payload_bytes_, weak_from_this(), address_);
    dialing_ = connection;
    connection->Dial(endpoints, offer.secret, [self = shared_from_this(), connection](absl::Status dialed) {
      if (!dialed.ok()) return self->Lost(connection.get(), dialed);
      absl::MutexLock lock(&self->mu_);
      if (self->dialing_ != connection) return;  // shut down meanwhile
      self->dialing_.reset();
      self->connection_ = connection;
      self->state_ = State::kConnected;
      self->failures_ = 0;
    });
  }

  const std::string address_;
  const std::string host_;
  const uint64_t max_payload_bytes_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  mutable absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);  // started by the first Connect
  State state_ ABSL_GUARDED_BY(mu_) = State::kIdle;
  absl::Time retry_after_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<Connection> dialing_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);
};

// ---- Connection ----

void TcpLaneClient::Connection::Dial(const asio::ip::tcp::resolver::results_type& endpoints, std::string secret,
                                     std::function<void(absl::Status)> done) {
  auto self = std::static_pointer_cast<Connection>(shared_from_this());
  asio::post(socket().get_executor(), [self, endpoints, secret = std::move(secret), done = std::move(done)] {
    self->dial_timer_ =
        std::make_unique<asio::steady_timer>(self->socket().get_executor(), absl::ToChronoNanoseconds(kConnectTimeout));
    self->dial_timer_->async_wait([self](const boost::system::error_code& error) {
      if (!error) self->Break(absl::DeadlineExceededError("no welcome within the connect timeout"));
    });
    auto fail = [self, done](const boost::system::error_code& error, const char* doing) {
      if (!self->broken()) self->Break(absl::UnavailableError(absl::StrCat(doing, ": ", error.message())));
      done(absl::UnavailableError(absl::StrCat(doing, ": ", error.message())));
    };
    asio::async_connect(
        self->socket(), endpoints,
        [self, secret, done, fail](const boost::system::error_code& error, const asio::ip::tcp::endpoint&) {
          if (error) return fail(error, "connect");
          SetTcpLaneSocketOptions(self->socket());
          auto hello = std::make_shared<std::string>(absl::StrCat(kTcpLaneHello, secret));
          asio::async_write(self->socket(), asio::buffer(*hello), [self, hello, done, fail](auto error, size_t) {
            if (error) return fail(error, "greeting");
            asio::async_read(self->socket(), asio::buffer(self->welcome_), [self, done, fail](auto error, size_t) {
              if (error) return fail(error, "awaiting the welcome");
              self->dial_timer_->cancel();
              if (std::string_view(self->welcome_, kTcpLaneGreetingBytes) != kTcpLaneWelcome) {
                self->Break(absl::UnavailableError("the server did not welcome the lane"));
                return done(absl::UnavailableError("the server did not welcome the lane"));
              }
              self->Split(self->writer_);
              if (self->broken()) return done(absl::UnavailableError("cannot duplicate the socket"));
              done(absl::OkStatus());
              self->StartReading();
            });
          });
        });
  });
}

void TcpLaneClient::Connection::Start(std::string_view method, OutgoingFrame request, const CallOptions& options,
                                      ResponseCallback done) {
  const uint64_t id = next_id_.fetch_add(1);
  TcpLaneMessage message = TcpLaneMessage::Request(id, method, std::move(request));
  auto self = std::static_pointer_cast<Connection>(shared_from_this());
  asio::post(socket().get_executor(),
             [self, id, options, done = std::move(done), message = std::move(message)]() mutable {
               if (self->broken()) {
                 return done(absl::UnavailableError(absl::StrCat("TCP lane to ", self->address_, " lost")), {});
               }
               self->Register(id, options, std::move(done));
               self->Send(std::move(message));
             });
}

void TcpLaneClient::Connection::Register(uint64_t id, const CallOptions& options, ResponseCallback done) {
  Pending& call = calls_[id];
  call.done = std::move(done);
  call.receive_into = options.receive_into;
  if (options.deadline == absl::InfiniteFuture()) return;
  call.timer = std::make_unique<asio::steady_timer>(socket().get_executor(), SteadyFromAbsl(options.deadline));
  call.timer->async_wait(
      [self = std::static_pointer_cast<Connection>(shared_from_this()), id](const boost::system::error_code& error) {
        if (!error) self->Expire(id);
      });
}

// A call's deadline passed: it completes now, unless its answer is arriving
// in its memory (then once the chunk in flight is in: Place).
void TcpLaneClient::Connection::Expire(uint64_t id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  if (receiving_ != id || !it->second.receive_into) {
    return Complete(id, absl::DeadlineExceededError(absl::StrCat("deadline passed on the TCP lane to ", address_)));
  }
  it->second.expired = true;
  grace_timer_ =
      std::make_unique<asio::steady_timer>(socket().get_executor(), absl::ToChronoNanoseconds(kTcpLaneInPlaceGrace));
  grace_timer_->async_wait(
      [self = std::static_pointer_cast<Connection>(shared_from_this()), id](const boost::system::error_code& error) {
        if (!error && self->receiving_ == id) {
          self->Break(absl::DeadlineExceededError("an answer received in place stalled past its deadline"));
        }
      });
}

void TcpLaneClient::Connection::Complete(uint64_t id, absl::Status status, IncomingFrame frame) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return;
  ResponseCallback done = std::move(it->second.done);
  if (it->second.timer != nullptr) it->second.timer->cancel();
  calls_.erase(it);
  done(std::move(status), std::move(frame));
}

absl::Status TcpLaneClient::Connection::OnHeader(const TcpLaneIncoming& message) {
  if (message.header.kind != TcpLaneKind::kAnswer) {
    return absl::InvalidArgumentError("malformed TCP lane message: a request sent to the client");
  }
  receiving_ = message.header.call_id;  // a call no longer here gets its answer dropped
  scratch_.reset();
  return absl::OkStatus();
}

char* TcpLaneClient::Connection::Place(const TcpLaneIncoming& message, size_t index, uint64_t offset) {
  const uint64_t id = message.header.call_id;
  auto it = calls_.find(id);
  if (it != calls_.end() && it->second.expired) {
    Complete(id, absl::DeadlineExceededError(absl::StrCat("deadline passed on the TCP lane to ", address_)));
    it = calls_.end();
  }
  if (it != calls_.end() && it->second.receive_into) {
    if (void* place = it->second.receive_into(offset, message.chunk_sizes[index])) return static_cast<char*>(place);
  }
  if (scratch_ == nullptr) scratch_.reset(new char[message.header.payload_bytes]);
  return scratch_.get() + offset;
}

void TcpLaneClient::Connection::OnMessage(TcpLaneIncoming message, std::vector<IncomingFrame::Piece> pieces) {
  receiving_ = 0;
  if (grace_timer_ != nullptr) grace_timer_->cancel();
  const auto code = static_cast<absl::StatusCode>(message.header.status_code);
  if (code != absl::StatusCode::kOk) {
    return Complete(message.header.call_id, absl::Status(code, message.text));
  }
  Complete(message.header.call_id, absl::OkStatus(),
           IncomingFrame(std::move(message.frame_header), std::move(pieces), std::move(scratch_)));
}

void TcpLaneClient::Connection::OnBroken(const absl::Status& why) {
  receiving_ = 0;
  for (auto* timer : {dial_timer_.get(), grace_timer_.get()}) {
    if (timer != nullptr) timer->cancel();
  }
  std::map<uint64_t, Pending> calls;
  calls.swap(calls_);
  const absl::Status failed = absl::UnavailableError(absl::StrCat("TCP lane to ", address_, " lost: ", why.message()));
  for (auto& [id, call] : calls) {
    if (call.timer != nullptr) call.timer->cancel();
    call.done(failed, {});
  }
  if (std::shared_ptr<Lane> lane = lane_.lock()) lane->Lost(this, why);
}

// ---- TcpLaneClient ----

TcpLaneClient::TcpLaneClient(std::string server_address, bool enabled, uint64_t max_payload_bytes) {
  std::string host = TcpLaneHostOf(server_address);
  if (!enabled || host.empty()) return;
  lane_ = std::make_shared<Lane>(std::move(server_address), std::move(host), max_payload_bytes);
}

TcpLaneClient::~TcpLaneClient() {
  if (lane_ != nullptr) lane_->Shutdown();
}

bool TcpLaneClient::Suits(const OutgoingFrame& request, const CallOptions& options) {
  if (options.wait_for_ready) return false;
  return options.receive_into != nullptr || request.payload_bytes() >= kTcpLaneMinPayloadBytes;
}

bool TcpLaneClient::AttachDue() { return lane_ != nullptr && lane_->AttachDue(); }

void TcpLaneClient::Attached(const absl::Status& status, std::string_view offer) {
  if (lane_ != nullptr) lane_->Attached(status, offer);
}

bool TcpLaneClient::Call(std::string_view method, OutgoingFrame& request, const CallOptions& options,
                         ResponseCallback& done) {
  return lane_ != nullptr && Suits(request, options) && lane_->Call(method, request, options, done);
}

bool TcpLaneClient::connected() const { return lane_ != nullptr && lane_->connected(); }

}  // namespace pstrain
