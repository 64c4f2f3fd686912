#include "ps/shard/parked_pulls.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pstrain {

void PullAnswer::Send() && {
  if (status.ok()) {
    respond(absl::OkStatus(), std::move(frame));
  } else {
    respond(std::move(status), {});
  }
}

void SendAll(std::vector<PullAnswer> answers) {
  for (PullAnswer& answer : answers) std::move(answer).Send();
}

void ParkedPulls::Park(const PullRequest& request, Responder respond, PullState state, absl::Time now) {
  const absl::Duration timeout = request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms()) : default_timeout_;
  parked_.push_back({request, std::move(respond), now + timeout, now, state == PullState::kBlockedByPolicy});
}

std::vector<PullAnswer> ParkedPulls::Retry(TryServe try_serve,
                                           absl::FunctionRef<void(absl::Duration)> waited_for_policy) {
  std::vector<PullAnswer> answers;
  for (auto it = parked_.begin(); it != parked_.end();) {
    OutgoingFrame response;
    absl::StatusOr<PullState> state = try_serve(it->request, &response);
    if (state.ok() && *state != PullState::kReady) {
      it->blocked_by_policy = it->blocked_by_policy || *state == PullState::kBlockedByPolicy;
      ++it;
      continue;
    }
    if (state.ok()) {
      if (it->blocked_by_policy) waited_for_policy(absl::Now() - it->parked_at);
      answers.push_back({std::move(it->respond), absl::OkStatus(), std::move(response)});
    } else {
      answers.push_back({std::move(it->respond), state.status(), {}});
    }
    it = parked_.erase(it);
  }
  return answers;
}

std::vector<PullAnswer> ParkedPulls::TakeExpired(absl::Time now,
                                                 absl::FunctionRef<std::string(const PullRequest&)> waiting_for) {
  std::vector<PullAnswer> expired;
  for (auto it = parked_.begin(); it != parked_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    expired.push_back({std::move(it->respond),
                       absl::DeadlineExceededError(absl::StrCat(
                           "shard ", shard_index_, ": pull by worker ", it->request.worker(),
                           " for version >= ", it->request.min_version(), " timed out: ", waiting_for(it->request))),
                       {}});
    it = parked_.erase(it);
  }
  return expired;
}

std::vector<PullAnswer> ParkedPulls::TakeAll(const absl::Status& status) {
  std::vector<PullAnswer> answers;
  for (Parked& p : parked_) answers.push_back({std::move(p.respond), status, {}});
  parked_.clear();
  return answers;
}

}  // namespace pstrain
