// ParkedPulls: the pulls a PS shard cannot answer yet (their variables are
// below the version asked for, the shard awaits its Init or a restore, or
// the consistency policy holds them back), each parked until a retry can
// answer it or its deadline passes.
//
// What "can be answered" means is the shard's: Retry asks it through a
// TryServe function. Whatever leaves the set comes back as PullAnswers, to be
// sent once the caller has released its locks: a responder is never called
// with a lock held.
//
// Threads: not synchronised; the owner guards it with its mutex (PsShard::mu_,
// so a pull is checked and parked atomically with respect to the updates
// that wake it). TryServe and the other callbacks run with that held.
#pragma once

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/transport.h"
#include "proto/ps.pb.h"

namespace pstrain {

// Where a pull stands.
enum class PullState { kReady, kWaitingForVersions, kBlockedByPolicy };

// The answer to one pull: `frame` when `status` is OK.
struct PullAnswer {
  Responder respond;
  absl::Status status;
  OutgoingFrame frame;

  // Calls the responder; never with a lock held.
  void Send() &&;
};

// Sends every answer, in order (no lock held).
void SendAll(std::vector<PullAnswer> answers);

class ParkedPulls {
 public:
  // Fills the frame and returns kReady when the pull can be answered now,
  // another state when it must wait; an error when the request is bad.
  using TryServe = absl::FunctionRef<absl::StatusOr<PullState>(const PullRequest&, OutgoingFrame*)>;

  // `shard_index` names the shard in timeouts; a pull without a timeout of
  // its own (timeout_ms) waits `default_timeout`.
  ParkedPulls(int shard_index, absl::Duration default_timeout)
      : shard_index_(shard_index), default_timeout_(default_timeout) {}

  // Parks a pull that TryServe found waiting in `state` at `now`.
  void Park(const PullRequest& request, Responder respond, PullState state, absl::Time now);

  // Tries every parked pull again, in the order they were parked. Those
  // answered or refused leave the set; `waited_for_policy` hears how long
  // each answered one waited when the policy ever held it back (statistics).
  std::vector<PullAnswer> Retry(TryServe try_serve, absl::FunctionRef<void(absl::Duration)> waited_for_policy);

  // Takes out the pulls whose deadline has come by `now`, each answered
  // DEADLINE_EXCEEDED: "shard 3: pull by worker 1 for version >= 5 timed
  // out: " and what it waits for, as `waiting_for` describes it.
  std::vector<PullAnswer> TakeExpired(absl::Time now, absl::FunctionRef<std::string(const PullRequest&)> waiting_for);

  // Takes out every parked pull, answered with `status`.
  std::vector<PullAnswer> TakeAll(const absl::Status& status);

  size_t size() const { return parked_.size(); }

 private:
  struct Parked {
    PullRequest request;
    Responder respond;
    absl::Time deadline;
    absl::Time parked_at;
    bool blocked_by_policy = false;  // ever waited for the policy (not only for versions)
  };

  const int shard_index_;
  const absl::Duration default_timeout_;
  std::vector<Parked> parked_;
};

}  // namespace pstrain
