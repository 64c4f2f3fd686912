#include "worker/collective/gloo_store.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gloo/common/error.h"

namespace pstrain {
namespace {

bool IsRankKey(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

GlooKvStore::GlooKvStore(KeyValueStore* store, std::string prefix, absl::Duration timeout, absl::Time deadline)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout), deadline_(deadline) {}

std::string GlooKvStore::Key(const std::string& key) const { return absl::StrCat(prefix_, "/", key); }

absl::Time GlooKvStore::DeadlineFor(absl::Duration timeout) const { return std::min(absl::Now() + timeout, deadline_); }

absl::Status GlooKvStore::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

void GlooKvStore::Fail(const absl::Status& status, const std::vector<std::string>& gloo_keys) {
  // Gloo keys its rendezvous by rank ("0", "1", ...): say which ranks.
  std::vector<std::string> ranks;
  for (const std::string& key : gloo_keys) {
    if (IsRankKey(key)) ranks.push_back(key);
  }
  std::string what;
  if (absl::IsDeadlineExceeded(status) && !ranks.empty()) {
    what = absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "),
                        ranks.size() == 1 ? " has" : " have", " not joined rendezvous \"", prefix_, "\": ");
  }
  absl::Status recorded(status.code(), absl::StrCat(what, status.message()));
  {
    absl::MutexLock lock(&mu_);
    last_error_ = recorded;
  }
  throw gloo::IoException(std::string(recorded.message()));
}

void GlooKvStore::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(Key(key), std::string(data.begin(), data.end()), DeadlineFor(timeout_));
  if (!status.ok()) Fail(status, {});
}

std::vector<char> GlooKvStore::get(const std::string& key) {
  absl::StatusOr<std::string> value = store_->Get(Key(key), DeadlineFor(timeout_));
  if (!value.ok()) Fail(value.status(), {key});
  return std::vector<char>(value->begin(), value->end());
}

void GlooKvStore::wait(const std::vector<std::string>& keys) { wait(keys, std::chrono::milliseconds(0)); }

void GlooKvStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  // Gloo's "no timeout" (0) means ours.
  const absl::Duration t = timeout.count() > 0 ? absl::FromChrono(timeout) : timeout_;
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const std::string& key : keys) full.push_back(Key(key));
  absl::Status status = store_->Wait(full, DeadlineFor(t));
  if (!status.ok()) Fail(status, keys);
}

}  // namespace pstrain
