// GlooKvStore: Gloo's rendezvous::Store over a pstrain KeyValueStore, so Gloo
// rendezvous runs through the chief's store (no shared file, no Redis).
//
// Keys are "<prefix>/<gloo key>". Gloo's Store interface cannot return an
// error, so failures throw gloo::IoException (as Gloo's own stores do); the
// underlying absl::Status is kept in last_error() for the caller to report.
// Every call is bounded by `timeout` (Gloo's per-call timeout when it passes
// one) and by `deadline`, whichever comes first.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "worker/collective/kv_store.h"

namespace pstrain {

class GlooKvStore : public gloo::rendezvous::Store {
 public:
  GlooKvStore(KeyValueStore* store, std::string prefix, absl::Duration timeout,
              absl::Time deadline = absl::InfiniteFuture());

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // The error behind the last exception thrown (OK if none).
  absl::Status last_error() const;

 private:
  std::string Key(const std::string& key) const;
  absl::Time DeadlineFor(absl::Duration timeout) const;
  // Records `status` (adding which ranks it concerns) and throws.
  [[noreturn]] void Fail(const absl::Status& status, const std::vector<std::string>& gloo_keys);

  KeyValueStore* store_;
  const std::string prefix_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
  mutable absl::Mutex mu_;
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
