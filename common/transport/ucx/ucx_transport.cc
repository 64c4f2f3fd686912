// The ucx transport's public face: Transport, Channel and Server over one
// engine (engine.h), and the "ucx" registration.
#include "common/transport/ucx/ucx_transport.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/host_port.h"
#include "common/transport/ucx/address.h"
#include "common/transport/ucx/client.h"
#include "common/transport/ucx/engine.h"
#include "common/transport/ucx/process_settings.h"
#include "common/transport/ucx/server.h"
#include "glog/logging.h"

namespace pstrain {
namespace {

using ucx::Engine;
using ucx::PendingCall;
using ucx::ServerState;
using ucx::SocketAddress;
using ucx::Task;

// Runs `fn` (which starts with engine.progress().AssertHeld()) on the
// progress thread and waits for it. False if the engine is stopped. A task
// once posted always runs, even when Stop() follows, so `fn` may refer to
// the caller's locals.
template <typename Fn>
bool RunOnProgressThread(Engine& engine, Fn fn) {
  absl::Notification done;
  Task task = [&fn, &done] {
    fn();
    done.Notify();
  };
  if (!engine.Post(std::move(task))) return false;
  done.WaitForNotification();
  return true;
}

class UcxChannel : public Channel {
 public:
  UcxChannel(std::shared_ptr<Engine> engine, std::string address, HostPort host_port)
      : engine_(std::move(engine)),
        address_(std::move(address)),
        host_port_(std::move(host_port)),
        conn_id_(engine_->NewId()) {}

  ~UcxChannel() override {
    Engine* engine = engine_.get();
    engine_->Post([engine, conn_id = conn_id_] {
      engine->progress().AssertHeld();
      engine->clients().CloseConn(conn_id);
    });
  }

  void Call(std::string_view method, OutgoingFrame request, const CallOptions& options,
            ResponseCallback done) override {
    auto call = std::make_unique<PendingCall>(std::move(done));
    call->conn_id = conn_id_;
    call->method = std::string(method);
    call->started = absl::Now();
    call->deadline = options.deadline;
    call->wait_for_ready = options.wait_for_ready;
    if (ucx::ReceiveInPlaceFromEnvironment()) call->receive_into = options.receive_into;
    const size_t bytes = method.size() + EncodeWireHeader(request.header).size() + request.payload_bytes();
    if (static_cast<int64_t>(bytes) > engine_->max_message_bytes()) {
      absl::Status too_big =
          absl::ResourceExhaustedError(absl::StrCat("ucx: request ", call->method, " of ", bytes,
                                                    " bytes exceeds max_message_bytes ", engine_->max_message_bytes()));
      Fail(std::move(call), std::move(too_big));
      return;
    }
    call->request = std::move(request);
    absl::StatusOr<SocketAddress> peer = Peer();
    if (!peer.ok()) {
      Fail(std::move(call), peer.status());
      return;
    }
    Engine* engine = engine_.get();
    const uint64_t call_id = engine_->NewId();
    Task task = [engine, call_id, call = std::move(call), address = address_, peer = *peer]() mutable {
      engine->progress().AssertHeld();
      engine->clients().Start(call_id, std::move(call), address, peer);
    };
    if (!engine_->Post(std::move(task))) {
      // The transport is gone: `task` is destroyed on return, and with it the
      // call, which completes (UNAVAILABLE) on this thread.
    }
  }

 private:
  void Fail(std::unique_ptr<PendingCall> call, absl::Status status) {
    engine_->RunCallback([completion = std::move(call->completion), status = std::move(status)]() mutable {
      completion.Run(std::move(status), {});
    });
  }

  // The server's socket address, resolved on the first call that needs it.
  absl::StatusOr<SocketAddress> Peer() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (peer_.has_value()) return *peer_;
    }
    absl::StatusOr<SocketAddress> resolved = ucx::Resolve(host_port_, /*passive=*/false);
    if (!resolved.ok()) {
      return absl::UnavailableError(absl::StrCat("ucx: cannot reach ", address_, ": ", resolved.status().message()));
    }
    absl::MutexLock lock(&mu_);
    peer_ = *resolved;
    return *resolved;
  }

  const std::shared_ptr<Engine> engine_;
  const std::string address_;
  const HostPort host_port_;
  const uint64_t conn_id_;
  absl::Mutex mu_;
  std::optional<SocketAddress> peer_ ABSL_GUARDED_BY(mu_);
};

class UcxServer : public Server {
 public:
  UcxServer(std::shared_ptr<Engine> engine, uint64_t id, std::shared_ptr<ServerState> state, int port)
      : engine_(std::move(engine)), id_(id), state_(std::move(state)), port_(port) {}

  ~UcxServer() override {
    Shutdown(absl::ZeroDuration());
    Engine* engine = engine_.get();
    engine_->Post([engine, id = id_] {
      engine->progress().AssertHeld();
      engine->servers().Remove(id);
    });
  }

  int port() const override { return port_; }

  // Stops accepting (listener closed; requests on open connections are
  // answered UNAVAILABLE), waits up to `grace` for every accepted request to
  // be answered and for handlers to return, then closes the connections
  // (answers already queued are flushed first). Not from inside Handle().
  void Shutdown(absl::Duration grace) override ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    const absl::Time deadline = absl::Now() + grace;
    Engine* engine = engine_.get();
    RunOnProgressThread(*engine_, [engine, id = id_] {
      engine->progress().AssertHeld();
      engine->servers().StopListening(id);
    });
    DrainRequests(deadline);
    RunOnProgressThread(*engine_, [engine, id = id_] {
      engine->progress().AssertHeld();
      engine->servers().CloseConns(id);
    });
  }

 private:
  // Stops taking requests (they are answered UNAVAILABLE), waits until
  // `deadline` for the accepted ones to be answered, then for handlers still
  // running (up to 10 s more).
  void DrainRequests(absl::Time deadline) ABSL_LOCKS_EXCLUDED(state_->mu) {
    absl::MutexLock lock(&state_->mu);
    state_->accepting = false;
    while (state_->unanswered > 0) {
      if (state_->changed.WaitWithDeadline(&state_->mu, deadline)) break;
    }
    // From here the handler is not called again; wait for calls in it to
    // return (they must not block for long).
    state_->closed = true;
    const absl::Time handlers_deadline = std::max(deadline, absl::Now()) + absl::Seconds(10);
    while (state_->in_handle > 0) {
      if (state_->changed.WaitWithDeadline(&state_->mu, handlers_deadline)) {
        LOG(ERROR) << "ucx: Shutdown of " << state_->address << ": a handler is still running after 10 s";
        break;
      }
    }
  }

  const std::shared_ptr<Engine> engine_;
  const uint64_t id_;
  const std::shared_ptr<ServerState> state_;
  const int port_;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

class UcxTransport : public Transport {
 public:
  explicit UcxTransport(const TransportOptions& options) : engine_(std::make_shared<Engine>(options)) {
    engine_->Start();
    if (!engine_->init_status().ok()) LOG(WARNING) << engine_->init_status();
  }
  ~UcxTransport() override { engine_->Stop(); }

  absl::StatusOr<std::unique_ptr<Channel>> Connect(const std::string& address) override {
    if (!engine_->init_status().ok()) return engine_->init_status();
    absl::StatusOr<HostPort> parsed = ucx::ParseAddress(address, /*allow_port_zero=*/false);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ucx: bad address '", address, "': ", parsed.status().message()));
    }
    return std::unique_ptr<Channel>(new UcxChannel(engine_, address, *std::move(parsed)));
  }

  absl::StatusOr<std::unique_ptr<Server>> Serve(const std::string& address, Handler* handler) override {
    if (!engine_->init_status().ok()) return engine_->init_status();
    absl::StatusOr<HostPort> parsed = ucx::ParseAddress(address, /*allow_port_zero=*/true);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ucx: bad listen address '", address, "': ", parsed.status().message()));
    }
    absl::StatusOr<SocketAddress> resolved = ucx::Resolve(*parsed, /*passive=*/true);
    if (!resolved.ok()) return resolved.status();
    auto state = std::make_shared<ServerState>(handler, address);
    const uint64_t id = engine_->NewId();
    absl::StatusOr<int> port = absl::UnavailableError("ucx: the transport shut down");
    Engine* engine = engine_.get();
    RunOnProgressThread(*engine_, [engine, id, state, &resolved, &port] {
      engine->progress().AssertHeld();
      port = engine->servers().Listen(id, state, *resolved);
    });
    if (!port.ok()) return port.status();
    return std::unique_ptr<Server>(new UcxServer(engine_, id, std::move(state), *port));
  }

 private:
  std::shared_ptr<Engine> engine_;
};

// UCX moves large parts zero-copy (cross-memory attach within a host, RDMA
// between hosts with verbs NICs); it carries no TLS or token (header).
const bool kRegistered =
    RegisterTransport("ucx", [](const TransportOptions& options) { return CreateUcxTransport(options); },
                      {.security = false, .same_host_zero_copy = true, .rdma = true});

}  // namespace

std::unique_ptr<Transport> CreateUcxTransport(const TransportOptions& options) {
  return std::make_unique<UcxTransport>(options);
}

}  // namespace pstrain
