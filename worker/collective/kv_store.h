// Rendezvous key-value store: how workers find each other before a collective
// (Gloo publishes each rank's listening addresses under "<prefix>/<rank>").
//
// The cluster already runs one: the chief (worker 0) serves a KvStoreService
// on its worker port through the Transport seam (grpc in production, inproc in
// tests); every worker, the chief included, talks to it through a
// KeyValueStore -- a TransportKeyValueStore over a Channel, or the service's
// own table in the chief's process. No shared file system is needed.
//
// Semantics: Set overwrites; keys are never deleted (use a fresh prefix per
// communicator / run). Every operation has a deadline; an expired wait is
// DEADLINE_EXCEEDED naming the keys still missing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"

namespace pstrain {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // Stores `value` under `key` (overwriting). The deadline bounds reaching
  // the store (a remote store may not be up yet).
  virtual absl::Status Set(const std::string& key, std::string value, absl::Time deadline) = 0;
  // Returns the value of `key`, waiting until it is set or `deadline` passes
  // (DEADLINE_EXCEEDED naming the key). A deadline in the past probes once.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline) = 0;
  // Waits until every key in `keys` is set, or `deadline` passes
  // (DEADLINE_EXCEEDED naming the keys still missing).
  virtual absl::Status Wait(const std::vector<std::string>& keys, absl::Time deadline) = 0;
};

// A store in this process: a mutex-protected table. Besides the blocking
// calls it offers WaitAsync, which the service uses to park remote requests.
// Thread-safe.
class InMemoryKeyValueStore : public KeyValueStore {
 public:
  InMemoryKeyValueStore();
  // Answers requests still parked in WaitAsync with UNAVAILABLE.
  ~InMemoryKeyValueStore() override;

  absl::Status Set(const std::string& key, std::string value, absl::Time deadline) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Time deadline) override;

  // Calls `done` exactly once, from some thread, without blocking the caller:
  // with the values of `keys` (in order) once all are set, or with
  // DEADLINE_EXCEEDED naming the missing keys at `deadline`, or UNAVAILABLE
  // when the store is destroyed first. `done` must not block.
  using WaitCallback = std::function<void(absl::StatusOr<std::vector<std::string>> values)>;
  void WaitAsync(std::vector<std::string> keys, absl::Time deadline, WaitCallback done);
  // Answers every request parked in WaitAsync now with `status`.
  void CancelWaiters(const absl::Status& status);

  size_t size() const;

 private:
  struct Waiter {
    std::vector<std::string> keys;
    absl::Time deadline;
    WaitCallback done;
  };
  using WaiterList = std::vector<std::shared_ptr<Waiter>>;

  bool AllSetLocked(const std::vector<std::string>& keys) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> ValuesLocked(const std::vector<std::string>& keys) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> MissingLocked(const std::vector<std::string>& keys) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReaperLoop();

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> table_ ABSL_GUARDED_BY(mu_);
  WaiterList waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when a waiter is parked
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;  // started with the first WaitAsync that has a finite deadline
};

// The store as a Handler: methods "KvSet", "KvGet", "KvWait" (headers in
// worker/collective/kv_store.proto). Requests that must wait are parked, not
// blocked on. Hosted by the chief on its worker port; its own table is
// available to the chief's process as local_store() (a Set there wakes
// remote waiters too).
class KvStoreService : public Handler {
 public:
  KvStoreService() = default;
  // Parked requests still there are answered UNAVAILABLE; the Server must be
  // shut down first (see CancelPending).
  ~KvStoreService() override = default;

  // Answers every parked KvGet/KvWait now with `status` (e.g. CANCELLED
  // "chief finished"). Call before Server::Shutdown, which waits for calls in
  // flight.
  void CancelPending(const absl::Status& status) { store_.CancelWaiters(status); }

  void Handle(std::string_view method, IncomingFrame request, Responder respond) override;

  // True for the methods this service answers, so a handler that serves
  // several services on one port can route to it.
  static bool Handles(std::string_view method);

  InMemoryKeyValueStore* local_store() { return &store_; }

 private:
  InMemoryKeyValueStore store_;
};

// The client: a KeyValueStore over a Channel to the KvStoreService. Calls
// wait for the service to come up (wait_for_ready, and retries while the
// server is not there yet, as with inproc) until their deadline. Get and Wait
// are held by the server until their deadline; the call itself carries a
// grace of 10% of the wait (20..200 ms), so a chief that stops answering is
// noticed at most that long after the deadline. Thread-safe.
class TransportKeyValueStore : public KeyValueStore {
 public:
  // `address` names the service in error messages.
  TransportKeyValueStore(std::unique_ptr<Channel> channel, std::string address);
  static absl::StatusOr<std::unique_ptr<TransportKeyValueStore>> Connect(Transport* transport,
                                                                         const std::string& address);

  absl::Status Set(const std::string& key, std::string value, absl::Time deadline) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Time deadline) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Time deadline) override;

 private:
  // One logical call: retried while UNAVAILABLE until `deadline`.
  absl::Status Call(std::string_view method, const std::vector<std::string>& keys, std::string value,
                    absl::Time deadline, std::string* response_value);

  std::unique_ptr<Channel> channel_;
  std::string address_;
};

// "[a, b]" for messages.
std::string FormatKeys(const std::vector<std::string>& keys);

}  // namespace pstrain
