// ParkedPulls on its own (ps/shard/parked_pulls.h): retries, deadlines,
// what a timeout says, and the answers that leave the set.
#include "ps/shard/parked_pulls.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1000);

PullRequest Request(int worker, int64_t min_version, int64_t timeout_ms = 0) {
  PullRequest request;
  request.set_worker(worker);
  request.set_min_version(min_version);
  request.set_timeout_ms(timeout_ms);
  return request;
}

// Records what each worker's responder was called with.
struct Responses {
  struct Response {
    absl::Status status;
    std::string header;
  };
  std::map<int, std::vector<Response>> by_worker;

  Responder For(int worker) {
    return [this, worker](absl::Status status, OutgoingFrame frame) {
      by_worker[worker].push_back({std::move(status), std::move(frame.header)});
    };
  }
};

// A shard whose variables are at `version`, whose policy holds back the
// workers in `blocked`, and which refuses worker 9's pulls.
struct FakeShard {
  int64_t version = 0;
  std::vector<int> blocked;
  std::vector<int> tried;

  absl::StatusOr<PullState> TryServe(const PullRequest& request, OutgoingFrame* response) {
    tried.push_back(request.worker());
    if (request.worker() == 9) return absl::InvalidArgumentError("bad pull");
    if (version < request.min_version()) return PullState::kWaitingForVersions;
    for (int w : blocked) {
      if (w == request.worker()) return PullState::kBlockedByPolicy;
    }
    response->header = absl::StrCat("v", version, " for ", request.worker());
    return PullState::kReady;
  }
};

std::vector<PullAnswer> Retry(ParkedPulls& parked, FakeShard& shard, std::vector<absl::Duration>* waited) {
  return parked.Retry([&](const PullRequest& r, OutgoingFrame* out) { return shard.TryServe(r, out); },
                      [&](absl::Duration d) { waited->push_back(d); });
}

TEST(ParkedPullsTest, ARetryAnswersWhatIsReadyInParkingOrderAndKeepsTheRest) {
  ParkedPulls parked(3, absl::Seconds(30));
  Responses responses;
  parked.Park(Request(0, 2), responses.For(0), PullState::kWaitingForVersions, kNow);
  parked.Park(Request(1, 1), responses.For(1), PullState::kWaitingForVersions, kNow);
  parked.Park(Request(2, 1), responses.For(2), PullState::kWaitingForVersions, kNow);
  parked.Park(Request(9, 0), responses.For(9), PullState::kWaitingForVersions, kNow);
  EXPECT_EQ(parked.size(), 4u);

  FakeShard shard;
  shard.version = 1;
  std::vector<absl::Duration> waited;
  SendAll(Retry(parked, shard, &waited));
  EXPECT_THAT(shard.tried, ElementsAre(0, 1, 2, 9));
  EXPECT_EQ(parked.size(), 1u);
  EXPECT_THAT(waited, IsEmpty());  // none was held back by the policy
  ASSERT_EQ(responses.by_worker[1].size(), 1u);
  EXPECT_TRUE(responses.by_worker[1][0].status.ok());
  EXPECT_EQ(responses.by_worker[1][0].header, "v1 for 1");
  ASSERT_EQ(responses.by_worker[2].size(), 1u);
  EXPECT_EQ(responses.by_worker[2][0].header, "v1 for 2");
  ASSERT_EQ(responses.by_worker[9].size(), 1u);  // refused, not kept
  EXPECT_EQ(responses.by_worker[9][0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(responses.by_worker[9][0].header, "");
  EXPECT_THAT(responses.by_worker[0], IsEmpty());

  shard.tried.clear();
  SendAll(Retry(parked, shard, &waited));
  EXPECT_THAT(shard.tried, ElementsAre(0));
  EXPECT_THAT(responses.by_worker[0], IsEmpty());
  shard.version = 2;
  SendAll(Retry(parked, shard, &waited));
  ASSERT_EQ(responses.by_worker[0].size(), 1u);
  EXPECT_EQ(responses.by_worker[0][0].header, "v2 for 0");
  EXPECT_EQ(parked.size(), 0u);
}

TEST(ParkedPullsTest, OnlyPullsThePolicyEverHeldBackReportTheirWait) {
  ParkedPulls parked(0, absl::Seconds(30));
  Responses responses;
  const absl::Time now = absl::Now();
  parked.Park(Request(0, 0), responses.For(0), PullState::kBlockedByPolicy, now);
  parked.Park(Request(1, 1), responses.For(1), PullState::kWaitingForVersions, now);
  parked.Park(Request(2, 1), responses.For(2), PullState::kWaitingForVersions, now);

  FakeShard shard;
  shard.blocked = {0, 1};
  std::vector<absl::Duration> waited;
  SendAll(Retry(parked, shard, &waited));  // worker 1 now waits for versions and the policy
  EXPECT_EQ(parked.size(), 3u);
  shard.version = 1;
  SendAll(Retry(parked, shard, &waited));  // the policy still holds 1 back; 2 goes
  EXPECT_EQ(parked.size(), 2u);
  EXPECT_THAT(waited, IsEmpty());
  shard.blocked.clear();
  SendAll(Retry(parked, shard, &waited));
  EXPECT_EQ(parked.size(), 0u);
  ASSERT_EQ(waited.size(), 2u);
  for (absl::Duration d : waited) EXPECT_GE(d, absl::ZeroDuration());
  EXPECT_EQ(responses.by_worker[0].size(), 1u);
  EXPECT_EQ(responses.by_worker[1].size(), 1u);
  EXPECT_EQ(responses.by_worker[2].size(), 1u);
}

TEST(ParkedPullsTest, PullsExpireAtTheirOwnTimeoutOrTheDefaultSayingWhatTheyWaitFor) {
  ParkedPulls parked(3, absl::Seconds(30));
  Responses responses;
  parked.Park(Request(0, 5, /*timeout_ms=*/2000), responses.For(0), PullState::kWaitingForVersions, kNow);
  parked.Park(Request(1, 6), responses.For(1), PullState::kWaitingForVersions, kNow);
  std::vector<int> described;
  auto waiting_for = [&](const PullRequest& r) {
    described.push_back(r.worker());
    return std::string("a is at version 4");
  };

  EXPECT_THAT(parked.TakeExpired(kNow + absl::Milliseconds(1999), waiting_for), IsEmpty());
  std::vector<PullAnswer> expired = parked.TakeExpired(kNow + absl::Seconds(2), waiting_for);  // at the deadline
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(expired[0].status.message(), "shard 3: pull by worker 0 for version >= 5 timed out: a is at version 4");
  EXPECT_THAT(described, ElementsAre(0));  // only what expires is described
  SendAll(std::move(expired));
  ASSERT_EQ(responses.by_worker[0].size(), 1u);
  EXPECT_EQ(responses.by_worker[0][0].status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(parked.size(), 1u);

  EXPECT_THAT(parked.TakeExpired(kNow + absl::Seconds(29), waiting_for), IsEmpty());
  expired = parked.TakeExpired(kNow + absl::Seconds(31), waiting_for);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].status.message(), "shard 3: pull by worker 1 for version >= 6 timed out: a is at version 4");
  EXPECT_EQ(parked.size(), 0u);
}

TEST(ParkedPullsTest, TakeAllAnswersEveryPullWithTheStatus) {
  ParkedPulls parked(0, absl::Seconds(30));
  Responses responses;
  parked.Park(Request(0, 1), responses.For(0), PullState::kWaitingForVersions, kNow);
  parked.Park(Request(1, 1), responses.For(1), PullState::kBlockedByPolicy, kNow);
  std::vector<PullAnswer> answers = parked.TakeAll(absl::CancelledError("shutting down"));
  EXPECT_EQ(parked.size(), 0u);
  EXPECT_THAT(responses.by_worker, IsEmpty());  // nothing sent until asked
  SendAll(std::move(answers));
  for (int w : {0, 1}) {
    ASSERT_EQ(responses.by_worker[w].size(), 1u);
    EXPECT_EQ(responses.by_worker[w][0].status, absl::CancelledError("shutting down"));
  }
}

}  // namespace
}  // namespace pstrain
