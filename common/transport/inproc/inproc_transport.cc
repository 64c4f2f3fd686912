#include "common/transport/inproc/inproc_transport.h"

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"

namespace pstrain {

// One call in flight: completes once, by the answer or by the deadline.
struct InprocCall {
  explicit InprocCall(ResponseCallback callback) : done(std::move(callback)) {}

  absl::Mutex mu;
  bool completed ABSL_GUARDED_BY(mu) = false;
  ResponseCallback done ABSL_GUARDED_BY(mu);
  // Its entry in the transport's deadlines, under the transport's lock
  // (State::mu): removed when it is answered, so a call's memory does not
  // wait for its deadline.
  using Deadlines = std::multimap<absl::Time, std::weak_ptr<InprocCall>>;
  std::optional<Deadlines::iterator> deadline;

  // Runs `done` (never under the lock) unless the call completed already.
  void Complete(absl::Status status, IncomingFrame frame) ABSL_LOCKS_EXCLUDED(mu) {
    ResponseCallback cb;
    {
      absl::MutexLock lock(&mu);
      if (completed) return;
      completed = true;
      cb = std::move(done);
    }
    cb(std::move(status), std::move(frame));
  }
};

struct InprocTransport::State {
  absl::Mutex mu;
  // Signalled when a deadline is added, a call finishes or the transport stops.
  absl::CondVar changed;
  std::map<std::string, Handler*> servers ABSL_GUARDED_BY(mu);
  InprocCall::Deadlines deadlines ABSL_GUARDED_BY(mu);
  std::map<std::string, int> in_flight ABSL_GUARDED_BY(mu);  // per address
  // Calls made with wait_for_ready before their server existed, per address.
  struct Waiting {
    std::string method;
    OutgoingFrame request;
    std::shared_ptr<InprocCall> call;
  };
  std::map<std::string, std::vector<Waiting>> waiting ABSL_GUARDED_BY(mu);
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::thread timer;

  // Expires calls at their deadlines until the transport stops.
  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    while (!stopping) {
      if (deadlines.empty()) {
        changed.Wait(&mu);
        continue;
      }
      const absl::Time next = deadlines.begin()->first;
      if (next > absl::Now()) {
        changed.WaitWithDeadline(&mu, next);
        continue;
      }
      std::shared_ptr<InprocCall> call = deadlines.begin()->second.lock();
      deadlines.erase(deadlines.begin());
      if (call == nullptr) continue;
      call->deadline.reset();
      mu.Unlock();
      call->Complete(absl::DeadlineExceededError("inproc call deadline exceeded"), {});
      call.reset();  // its callback's captures are released outside the lock
      mu.Lock();
    }
  }
};

namespace {

class InprocChannel : public Channel {
 public:
  InprocChannel(std::shared_ptr<InprocTransport::State> state, std::string address)
      : state_(std::move(state)), address_(std::move(address)) {}

  void Call(std::string_view method, OutgoingFrame request, const CallOptions& options,
            ResponseCallback done) override {
    auto call = std::make_shared<InprocCall>(std::move(done));
    Handler* handler = nullptr;
    {
      absl::MutexLock lock(&state_->mu);
      auto it = state_->servers.find(address_);
      if (it != state_->servers.end()) handler = it->second;
      if (handler != nullptr) {
        ++state_->in_flight[address_];
        if (options.deadline != absl::InfiniteFuture()) {
          call->deadline = state_->deadlines.emplace(options.deadline, call);
          state_->changed.SignalAll();
        }
      } else if (options.wait_for_ready) {
        // Park until Serve() for this address, or until the deadline.
        if (options.deadline != absl::InfiniteFuture()) {
          call->deadline = state_->deadlines.emplace(options.deadline, call);
          state_->changed.SignalAll();
        }
        state_->waiting[address_].push_back({std::string(method), std::move(request), call});
        return;
      }
    }
    if (handler == nullptr) {
      call->Complete(absl::UnavailableError(absl::StrCat("inproc: no server at ", address_)), {});
      return;
    }
    Dispatch(state_, address_, handler, method, std::move(request), call);
  }

  // Hands `request` to `handler` (whose in_flight count the caller raised).
  static void Dispatch(std::shared_ptr<InprocTransport::State> state, const std::string& address, Handler* handler,
                       std::string_view method, OutgoingFrame request, std::shared_ptr<InprocCall> call) {
    handler->Handle(method, IncomingFrame::FromOutgoing(std::move(request)),
                    [call, state, address](absl::Status status, OutgoingFrame response) {
                      call->Complete(std::move(status), IncomingFrame::FromOutgoing(std::move(response)));
                      absl::MutexLock lock(&state->mu);
                      if (call->deadline.has_value()) {
                        state->deadlines.erase(*call->deadline);
                        call->deadline.reset();
                      }
                      --state->in_flight[address];
                      state->changed.SignalAll();
                    });
  }

 private:
  std::shared_ptr<InprocTransport::State> state_;
  std::string address_;
};

class InprocServer : public Server {
 public:
  InprocServer(std::shared_ptr<InprocTransport::State> state, std::string address)
      : state_(std::move(state)), address_(std::move(address)) {}
  ~InprocServer() override { Shutdown(absl::ZeroDuration()); }

  int port() const override {
    absl::StatusOr<HostPort> parsed = ParseHostPort(address_);
    return parsed.ok() ? parsed->port : 0;
  }

  void Shutdown(absl::Duration grace) override {
    absl::MutexLock lock(&state_->mu);
    if (shut_down_.exchange(true)) return;
    state_->servers.erase(address_);
    const absl::Time deadline = absl::Now() + grace;
    while (state_->in_flight[address_] != 0) {
      if (state_->changed.WaitWithDeadline(&state_->mu, deadline)) break;  // timed out
    }
  }

 private:
  std::shared_ptr<InprocTransport::State> state_;
  std::string address_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace

InprocTransport::InprocTransport() : state_(std::make_shared<State>()) {
  state_->timer = std::thread([state = state_.get()] { state->TimerLoop(); });
}

InprocTransport::~InprocTransport() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    state_->changed.SignalAll();
  }
  state_->timer.join();
}

int InprocTransport::watched_deadlines() const {
  absl::MutexLock lock(&state_->mu);
  return static_cast<int>(state_->deadlines.size());
}

absl::StatusOr<std::unique_ptr<Channel>> InprocTransport::Connect(const std::string& address) {
  return std::unique_ptr<Channel>(new InprocChannel(state_, address));
}

absl::StatusOr<std::unique_ptr<Server>> InprocTransport::Serve(const std::string& address, Handler* handler) {
  std::vector<State::Waiting> waiting;
  {
    absl::MutexLock lock(&state_->mu);
    if (state_->servers.count(address) > 0) {
      return absl::AlreadyExistsError(absl::StrCat("inproc: address ", address, " already served"));
    }
    state_->servers[address] = handler;
    waiting.swap(state_->waiting[address]);
    state_->in_flight[address] += static_cast<int>(waiting.size());
  }
  auto server = std::unique_ptr<Server>(new InprocServer(state_, address));
  // Calls that waited for this server (an expired one still runs, but its
  // answer is dropped: the caller already got DEADLINE_EXCEEDED).
  for (State::Waiting& w : waiting) {
    InprocChannel::Dispatch(state_, address, handler, w.method, std::move(w.request), w.call);
  }
  return server;
}

}  // namespace pstrain
