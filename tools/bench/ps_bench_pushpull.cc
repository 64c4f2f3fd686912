#include "tools/bench/ps_bench_pushpull.h"

#include <memory>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "worker/push_admission.h"

namespace pstrain::bench {
namespace {

// The round's state, shared with the transport's callbacks.
class Round : public std::enable_shared_from_this<Round> {
 public:
  Round(PsClient& client, int64_t window_bytes, int pushes_per_shard, absl::Duration timeout)
      : client_(client),
        timeout_(timeout),
        admission_(window_bytes, pushes_per_shard, client.num_shards(), client.ColocatedShards()),
        unanswered_(client.num_push_batches()) {
    for (int b = 0; b < client.num_push_batches(); ++b) unsent_.insert(b);
  }

  // Sends the pushes the window and the shards' limits admit, in batch
  // order; each acknowledged push starts its pull and admits more.
  void SendPushes() {
    std::vector<int> sends;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = unsent_.begin(); it != unsent_.end() && status_.ok() && !admission_.Saturated();) {
        const PsClient::BatchInfo batch = client_.Batch(*it);
        const PushAdmission::Verdict verdict = admission_.Admit(batch.bytes, batch.shard);
        if (verdict == PushAdmission::Verdict::kWindowFull) break;
        if (verdict == PushAdmission::Verdict::kShardBusy) {
          ++it;
          continue;
        }
        sends.push_back(*it);
        it = unsent_.erase(it);
      }
    }
    for (int b : sends) {
      client_.PushBatchAsync(b, /*step=*/0, /*local_step=*/0,
                             [self = shared_from_this(), b](absl::Status s, int) { self->OnPushed(b, s); });
    }
  }

  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    auto answered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unanswered_ == 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&answered), timeout_)) {
      return absl::DeadlineExceededError(absl::StrCat("push+pull round: ", unanswered_, " of ",
                                                      client_.num_push_batches(), " batches unanswered after ",
                                                      absl::FormatDuration(timeout_)));
    }
    return status_;
  }

 private:
  void OnPushed(int batch, const absl::Status& s) {
    {
      absl::MutexLock lock(&mu_);
      const PsClient::BatchInfo info = client_.Batch(batch);
      admission_.Done(info.bytes, info.shard);
    }
    if (!s.ok()) return Finish(s);
    client_.PullBatchAsync(batch, /*min_version=*/0, timeout_, /*local_step=*/0,
                           [self = shared_from_this(), batch](absl::Status s, IncomingFrame response) {
                             if (s.ok()) s = self->client_.ReadBatchPull(batch, response).status();
                             self->Finish(s);
                           });
    SendPushes();
  }

  // One batch answered; after an error, the batches never sent count as
  // answered too.
  void Finish(const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    --unanswered_;
    if (s.ok() || !status_.ok()) return;
    status_ = s;
    unanswered_ -= static_cast<int>(unsent_.size());
    unsent_.clear();
  }

  PsClient& client_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  PushAdmission admission_ ABSL_GUARDED_BY(mu_);  // the pipeline's rule
  std::set<int> unsent_ ABSL_GUARDED_BY(mu_);     // batches not pushed yet
  int unanswered_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status PipelinedPushPull(PsClient& client, int64_t window_bytes, int pushes_per_shard, absl::Duration timeout) {
  auto round = std::make_shared<Round>(client, window_bytes, pushes_per_shard, timeout);
  round->SendPushes();
  return round->Wait();
}

}  // namespace pstrain::bench
