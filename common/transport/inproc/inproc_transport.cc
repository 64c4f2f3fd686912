#include "common/transport/inproc/inproc_transport.h"

#include <condition_variable>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/host_port.h"

namespace pstrain {

// One call in flight: completes once, by the answer or by the deadline.
struct InprocCall {
  std::mutex mu;
  bool completed = false;
  ResponseCallback done;

  void Complete(absl::Status status, IncomingFrame frame) {
    ResponseCallback cb;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (completed) return;
      completed = true;
      cb = std::move(done);
    }
    cb(std::move(status), std::move(frame));
  }
};

struct InprocTransport::State {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, Handler*> servers;
  std::multimap<absl::Time, std::weak_ptr<InprocCall>> deadlines;
  std::map<std::string, int> in_flight;  // per address
  // Calls made with wait_for_ready before their server existed, per address.
  struct Waiting {
    std::string method;
    OutgoingFrame request;
    std::shared_ptr<InprocCall> call;
  };
  std::map<std::string, std::vector<Waiting>> waiting;
  bool stopping = false;
  std::thread timer;

  void TimerLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      if (deadlines.empty()) {
        cv.wait(lock);
        continue;
      }
      absl::Time next = deadlines.begin()->first;
      absl::Time now = absl::Now();
      if (next > now) {
        cv.wait_for(lock, absl::ToChronoNanoseconds(next - now));
        continue;
      }
      std::weak_ptr<InprocCall> weak = deadlines.begin()->second;
      deadlines.erase(deadlines.begin());
      lock.unlock();
      if (auto call = weak.lock()) call->Complete(absl::DeadlineExceededError("inproc call deadline exceeded"), {});
      lock.lock();
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
    auto call = std::make_shared<InprocCall>();
    call->done = std::move(done);
    Handler* handler = nullptr;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = state_->servers.find(address_);
      if (it != state_->servers.end()) handler = it->second;
      if (handler != nullptr) {
        ++state_->in_flight[address_];
        if (options.deadline != absl::InfiniteFuture()) {
          state_->deadlines.emplace(options.deadline, call);
          state_->cv.notify_all();
        }
      }
    }
    if (handler == nullptr) {
      if (options.wait_for_ready) {
        // Park until Serve() for this address, or until the deadline.
        std::lock_guard<std::mutex> lock(state_->mu);
        if (options.deadline != absl::InfiniteFuture()) {
          state_->deadlines.emplace(options.deadline, call);
          state_->cv.notify_all();
        }
        state_->waiting[address_].push_back({std::string(method), std::move(request), call});
        return;
      }
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
                      std::lock_guard<std::mutex> lock(state->mu);
                      --state->in_flight[address];
                      state->cv.notify_all();
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
    std::unique_lock<std::mutex> lock(state_->mu);
    if (shut_down_) return;
    shut_down_ = true;
    state_->servers.erase(address_);
    state_->cv.wait_for(lock, absl::ToChronoNanoseconds(grace), [&] { return state_->in_flight[address_] == 0; });
  }

 private:
  std::shared_ptr<InprocTransport::State> state_;
  std::string address_;
  bool shut_down_ = false;
};

}  // namespace

InprocTransport::InprocTransport() : state_(std::make_shared<State>()) {
  state_->timer = std::thread([state = state_.get()] { state->TimerLoop(); });
}

InprocTransport::~InprocTransport() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  state_->timer.join();
}

absl::StatusOr<std::unique_ptr<Channel>> InprocTransport::Connect(const std::string& address) {
  return std::unique_ptr<Channel>(new InprocChannel(state_, address));
}

absl::StatusOr<std::unique_ptr<Server>> InprocTransport::Serve(const std::string& address, Handler* handler) {
  std::vector<State::Waiting> waiting;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
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
