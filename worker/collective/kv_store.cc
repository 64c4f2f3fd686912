#include "worker/collective/kv_store.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/collective/kv_store.pb.h"

namespace pstrain {
namespace {

constexpr std::string_view kSet = "KvSet";
constexpr std::string_view kGet = "KvGet";
constexpr std::string_view kWait = "KvWait";

// absl::string_view is not std::string_view in this abseil build.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string Quote(const std::string& key) { return absl::StrCat("\"", key, "\""); }

// "key "a"" or "keys [a, b]".
std::string DescribeKeys(const std::vector<std::string>& keys) {
  if (keys.size() == 1) return absl::StrCat("key ", Quote(keys[0]));
  return absl::StrCat("keys ", FormatKeys(keys));
}

std::string ShortDuration(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "forever";
  // Whole milliseconds read better than absl's "2.999871s".
  return absl::FormatDuration(absl::Milliseconds(absl::ToInt64Milliseconds(d)));
}

}  // namespace

std::string FormatKeys(const std::vector<std::string>& keys) {
  return absl::StrCat("[", absl::StrJoin(keys, ", "), "]");
}

// ---- InMemoryKeyValueStore ----

InMemoryKeyValueStore::InMemoryKeyValueStore() = default;

InMemoryKeyValueStore::~InMemoryKeyValueStore() {
  WaiterList orphans;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    orphans.swap(waiters_);
  }
  if (reaper_.joinable()) reaper_.join();
  for (const auto& w : orphans) {
    w->done(absl::UnavailableError(absl::StrCat("kv store shut down while waiting for ", DescribeKeys(w->keys))));
  }
}

bool InMemoryKeyValueStore::AllSetLocked(const std::vector<std::string>& keys) const {
  for (const std::string& key : keys) {
    if (table_.count(key) == 0) return false;
  }
  return true;
}

std::vector<std::string> InMemoryKeyValueStore::ValuesLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(table_.at(key));
  return values;
}

std::vector<std::string> InMemoryKeyValueStore::MissingLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const std::string& key : keys) {
    if (table_.count(key) == 0) missing.push_back(key);
  }
  return missing;
}

absl::Status InMemoryKeyValueStore::Set(const std::string& key, std::string value, absl::Time /*deadline*/) {
  std::vector<std::pair<std::shared_ptr<Waiter>, std::vector<std::string>>> ready;
  {
    absl::MutexLock lock(&mu_);
    table_[key] = std::move(value);
    // Blocking Get/Wait re-check their Conditions when the lock is released;
    // parked async waiters are checked here.
    auto keep = waiters_.begin();
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (AllSetLocked((*it)->keys)) {
        ready.emplace_back(*it, ValuesLocked((*it)->keys));
      } else {
        *keep++ = std::move(*it);
      }
    }
    waiters_.erase(keep, waiters_.end());
  }
  for (auto& [waiter, values] : ready) waiter->done(std::move(values));
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(const std::string& key, absl::Time deadline) {
  const absl::Time start = absl::Now();
  auto is_set = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return table_.count(key) > 0; };
  const bool found = mu_.LockWhenWithDeadline(absl::Condition(&is_set), deadline);
  std::string value;
  if (found) value = table_.at(key);
  mu_.Unlock();
  if (!found) {
    return absl::DeadlineExceededError(
        absl::StrCat("key ", Quote(key), " not set within ", ShortDuration(deadline - start)));
  }
  return value;
}

absl::Status InMemoryKeyValueStore::Wait(const std::vector<std::string>& keys, absl::Time deadline) {
  const absl::Time start = absl::Now();
  auto all_set = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return AllSetLocked(keys); };
  const bool found = mu_.LockWhenWithDeadline(absl::Condition(&all_set), deadline);
  std::vector<std::string> missing;
  if (!found) missing = MissingLocked(keys);
  mu_.Unlock();
  if (!found) {
    return absl::DeadlineExceededError(
        absl::StrCat(DescribeKeys(missing), " not set within ", ShortDuration(deadline - start)));
  }
  return absl::OkStatus();
}

void InMemoryKeyValueStore::WaitAsync(std::vector<std::string> keys, absl::Time deadline, WaitCallback done) {
  absl::StatusOr<std::vector<std::string>> immediate;
  {
    absl::MutexLock lock(&mu_);
    if (AllSetLocked(keys)) {
      immediate = ValuesLocked(keys);
    } else if (stopping_) {
      immediate = absl::UnavailableError("kv store shutting down");
    } else if (deadline <= absl::Now()) {
      immediate = absl::DeadlineExceededError(absl::StrCat(DescribeKeys(MissingLocked(keys)), " not set"));
    } else {
      auto waiter = std::make_shared<Waiter>();
      waiter->keys = std::move(keys);
      waiter->deadline = deadline;
      waiter->done = std::move(done);
      waiters_.push_back(std::move(waiter));
      ++generation_;
      if (deadline != absl::InfiniteFuture() && !reaper_.joinable()) {
        reaper_ = std::thread([this] { ReaperLoop(); });
      }
      return;
    }
  }
  done(std::move(immediate));
}

void InMemoryKeyValueStore::CancelWaiters(const absl::Status& status) {
  WaiterList cancelled;
  {
    absl::MutexLock lock(&mu_);
    cancelled.swap(waiters_);
  }
  for (const auto& w : cancelled) {
    w->done(absl::Status(status.code(),
                         absl::StrCat(status.message(), " (while waiting for ", DescribeKeys(w->keys), ")")));
  }
}

void InMemoryKeyValueStore::ReaperLoop() {
  mu_.Lock();
  while (!stopping_) {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& w : waiters_) next = std::min(next, w->deadline);
    // Wake at the earliest deadline, or when stopping or a waiter is added
    // (its deadline may be earlier).
    const uint64_t seen = generation_;
    auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || generation_ != seen; };
    mu_.AwaitWithDeadline(absl::Condition(&changed), next);
    if (stopping_) break;
    const absl::Time now = absl::Now();
    std::vector<std::pair<std::shared_ptr<Waiter>, std::vector<std::string>>> expired;
    auto keep = waiters_.begin();
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if ((*it)->deadline <= now) {
        expired.emplace_back(*it, MissingLocked((*it)->keys));
      } else {
        *keep++ = std::move(*it);
      }
    }
    waiters_.erase(keep, waiters_.end());
    if (expired.empty()) continue;
    mu_.Unlock();
    for (auto& [waiter, missing] : expired) {
      waiter->done(absl::DeadlineExceededError(absl::StrCat(DescribeKeys(missing), " not set by the deadline")));
    }
    mu_.Lock();
  }
  mu_.Unlock();
}

size_t InMemoryKeyValueStore::size() const {
  absl::MutexLock lock(&mu_);
  return table_.size();
}

// ---- KvStoreService ----

bool KvStoreService::Handles(std::string_view method) { return method == kSet || method == kGet || method == kWait; }

void KvStoreService::Handle(std::string_view method, IncomingFrame request, Responder respond) {
  collective::KvRequest req;
  if (!Handles(method)) {
    respond(absl::UnimplementedError(absl::StrCat("kv store: unknown method ", Sv(method))), {});
    return;
  }
  if (!request.ParseHeader(&req)) {
    respond(absl::InvalidArgumentError(absl::StrCat(Sv(method), ": malformed request header")), {});
    return;
  }
  if (req.keys_size() == 0 || (method != kWait && req.keys_size() != 1)) {
    respond(absl::InvalidArgumentError(absl::StrCat(Sv(method), ": expected ",
                                                    method == kWait ? "at least one key" : "exactly one key", ", got ",
                                                    req.keys_size())),
            {});
    return;
  }
  std::vector<std::string> keys(req.keys().begin(), req.keys().end());
  if (method == kSet) {
    absl::Status status = store_.Set(keys[0], std::move(*req.mutable_value()), absl::InfiniteFuture());
    respond(status, status.ok() ? OutgoingFrame::FromHeader(collective::KvResponse()) : OutgoingFrame());
    return;
  }
  absl::Time deadline = absl::Now();  // wait_ms <= 0: answer at once
  if (req.wait_ms() == std::numeric_limits<int64_t>::max()) {
    deadline = absl::InfiniteFuture();
  } else if (req.wait_ms() > 0) {
    deadline += absl::Milliseconds(req.wait_ms());
  }
  const bool want_value = method == kGet;
  store_.WaitAsync(std::move(keys), deadline, [respond, want_value](absl::StatusOr<std::vector<std::string>> values) {
    if (!values.ok()) {
      respond(values.status(), {});
      return;
    }
    collective::KvResponse response;
    if (want_value) response.set_value(std::move(values->front()));
    respond(absl::OkStatus(), OutgoingFrame::FromHeader(response));
  });
}

// ---- TransportKeyValueStore ----

TransportKeyValueStore::TransportKeyValueStore(std::unique_ptr<Channel> channel, std::string address)
    : channel_(std::move(channel)), address_(std::move(address)) {}

absl::StatusOr<std::unique_ptr<TransportKeyValueStore>> TransportKeyValueStore::Connect(Transport* transport,
                                                                                        const std::string& address) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel, transport->Connect(address));
  return std::make_unique<TransportKeyValueStore>(std::move(channel), address);
}

absl::Status TransportKeyValueStore::Call(std::string_view method, const std::vector<std::string>& keys,
                                          std::string value, absl::Time deadline, std::string* response_value) {
  const absl::Time start = absl::Now();
  absl::Duration backoff = absl::Milliseconds(10);
  absl::Status last;
  while (true) {
    collective::KvRequest req;
    for (const std::string& key : keys) req.add_keys(key);
    absl::Time call_deadline = deadline;
    if (method == kSet) {
      req.set_value(value);
    } else {
      // The server holds the request until the deadline and then answers
      // with the keys still missing; the call itself gets a little grace so
      // that answer, not the transport's bare DEADLINE_EXCEEDED, arrives.
      const absl::Duration remaining = std::max(deadline - absl::Now(), absl::ZeroDuration());
      req.set_wait_ms(absl::ToInt64Milliseconds(absl::Ceil(remaining, absl::Milliseconds(1))));
      call_deadline = deadline + std::clamp(remaining / 10, absl::Milliseconds(20), absl::Milliseconds(200));
    }
    CallOptions options;
    options.deadline = call_deadline;
    options.wait_for_ready = true;
    IncomingFrame response;
    last = channel_->CallSync(method, OutgoingFrame::FromHeader(req), options, &response);
    if (last.ok()) {
      if (response_value != nullptr) {
        collective::KvResponse resp;
        if (!response.ParseHeader(&resp)) {
          return absl::InternalError(absl::StrCat("kv store at ", address_, ": ", Sv(method), " ", DescribeKeys(keys),
                                                  ": malformed response header"));
        }
        *response_value = std::move(*resp.mutable_value());
      }
      return absl::OkStatus();
    }
    // Not up yet (a transport without wait_for_ready, or a server restarting):
    // retry until the deadline.
    const absl::Time now = absl::Now();
    if (!absl::IsUnavailable(last) || now >= deadline) break;
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(2 * backoff, absl::Milliseconds(200));
  }
  const std::string waited = ShortDuration(absl::Now() - start);
  if (absl::IsDeadlineExceeded(last)) {
    if (method == kSet) {
      return absl::DeadlineExceededError(absl::StrCat("kv store at ", address_, ": setting ", DescribeKeys(keys),
                                                      " not acknowledged within ", waited, " (", last.message(), ")"));
    }
    return absl::DeadlineExceededError(absl::StrCat("kv store at ", address_, ": ", DescribeKeys(keys),
                                                    " not set within ", waited, " (", last.message(), ")"));
  }
  if (absl::IsUnavailable(last)) {
    return absl::UnavailableError(absl::StrCat("kv store at ", address_, " unreachable for ", waited, " (", Sv(method),
                                               " ", DescribeKeys(keys), "): ", last.message()));
  }
  return absl::Status(last.code(), absl::StrCat("kv store at ", address_, ": ", Sv(method), " ", DescribeKeys(keys),
                                                ": ", last.message()));
}

absl::Status TransportKeyValueStore::Set(const std::string& key, std::string value, absl::Time deadline) {
  return Call(kSet, {key}, std::move(value), deadline, nullptr);
}

absl::StatusOr<std::string> TransportKeyValueStore::Get(const std::string& key, absl::Time deadline) {
  std::string value;
  PSTRAIN_RETURN_IF_ERROR(Call(kGet, {key}, "", deadline, &value));
  return value;
}

absl::Status TransportKeyValueStore::Wait(const std::vector<std::string>& keys, absl::Time deadline) {
  if (keys.empty()) return absl::OkStatus();
  return Call(kWait, keys, "", deadline, nullptr);
}

}  // namespace pstrain
