// Shared helpers of the transport tests: an echo handler, a handler that keeps
// its responders for answering later, and frame builders.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"

namespace pstrain::testing_util {

inline std::string Bytes(size_t n, uint32_t seed) {
  // splitmix64, 8 bytes per step: fast enough for 64 MiB.
  std::string s(n, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  auto next = [&x] {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t r = next();
    std::memcpy(&s[i], &r, 8);
  }
  uint64_t r = next();
  for (; i < n; ++i, r >>= 8) s[i] = static_cast<char>(r);
  return s;
}

// A chunk owning a copy of `bytes`.
inline ConstChunk OwnedChunk(std::string bytes) {
  auto owner = std::make_shared<std::string>(std::move(bytes));
  return ConstChunk{owner->data(), owner->size(), owner};
}

// A chunk whose owner flips `*released` when it is destroyed.
inline ConstChunk TrackedChunk(const std::string& bytes, std::shared_ptr<std::atomic<bool>> released,
                               std::weak_ptr<const void>* weak = nullptr) {
  auto* copy = new std::string(bytes);
  std::shared_ptr<const void> owner(copy, [released](const std::string* p) {
    delete p;
    released->store(true);
  });
  if (weak != nullptr) *weak = owner;
  return ConstChunk{copy->data(), copy->size(), owner};
}

inline std::string ReadPayload(IncomingFrame& frame) {
  std::string out(frame.remaining(), '\0');
  absl::Status s = frame.Read(out.data(), out.size());
  if (!s.ok()) return "<read failed: " + std::string(s.message()) + ">";
  return out;
}

// Waits up to `timeout` for `pred`.
template <typename Pred>
bool WaitFor(Pred pred, absl::Duration timeout = absl::Seconds(5)) {
  absl::Time deadline = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

// Calls a function for every request.
class FunctionHandler : public Handler {
 public:
  using Fn = std::function<void(std::string_view, IncomingFrame, Responder)>;
  explicit FunctionHandler(Fn fn) : fn_(std::move(fn)) {}
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    fn_(method, std::move(request), std::move(respond));
  }

 private:
  Fn fn_;
};

// Echoes header and payload (the payload's pieces become the response's
// chunks). Method "Fail" answers with the status named by the header
// ("<code>:<message>"). Records the last method it saw.
class EchoHandler : public Handler {
 public:
  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      methods_.emplace_back(method);
    }
    ++calls_;
    if (method == "Fail") {
      const std::string& h = request.header();
      size_t colon = h.find(':');
      int code = std::atoi(h.substr(0, colon).c_str());
      respond(absl::Status(static_cast<absl::StatusCode>(code), h.substr(colon + 1)), {});
      return;
    }
    // Zero-copy echo: the response's chunks are the request's pieces, kept
    // alive by the request frame itself.
    auto keep = std::make_shared<IncomingFrame>(std::move(request));
    OutgoingFrame response;
    response.header = keep->header();
    absl::Status s = keep->Consume(keep->remaining(), [&](const char* data, size_t size) {
      response.chunks.push_back(ConstChunk{data, size, keep});
    });
    if (!s.ok()) {
      respond(s, {});
      return;
    }
    respond(absl::OkStatus(), std::move(response));
  }

  std::vector<std::string> methods() {
    std::lock_guard<std::mutex> lock(mu_);
    return methods_;
  }
  int calls() const { return calls_.load(); }

 private:
  std::mutex mu_;
  std::vector<std::string> methods_;
  std::atomic<int> calls_{0};
};

// Keeps every responder; the test answers when it likes.
class HoldingHandler : public Handler {
 public:
  struct Held {
    std::string method;
    std::string header;
    std::string payload;
    Responder respond;
  };

  void Handle(std::string_view method, IncomingFrame request, Responder respond) override {
    Held held{std::string(method), request.header(), ReadPayload(request), std::move(respond)};
    std::lock_guard<std::mutex> lock(mu_);
    held_.push_back(std::move(held));
    cv_.notify_all();
  }

  // Waits until `n` requests are held.
  bool WaitForHeld(size_t n, absl::Duration timeout = absl::Seconds(5)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return held_.size() >= n; });
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }

  // Takes the held request `i` (its responder must then be called).
  Held Take(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    Held h = std::move(held_.at(i));
    held_.at(i).respond = nullptr;
    return h;
  }

  // Answers every responder not taken yet (OK, echoing the header).
  void AnswerAll() {
    std::vector<Held> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(held_);
    }
    for (Held& h : all) {
      if (h.respond) {
        OutgoingFrame f;
        f.header = h.header;
        h.respond(absl::OkStatus(), std::move(f));
      }
    }
  }

  ~HoldingHandler() override { AnswerAll(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Held> held_;
};

}  // namespace pstrain::testing_util
