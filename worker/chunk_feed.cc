#include "worker/chunk_feed.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

ChunkFeed::ChunkFeed(Exchange exchange, const Options& options) : exchange_(std::move(exchange)), options_(options) {}

absl::StatusOr<std::optional<ChunkFeed::Batch>> ChunkFeed::Next(int64_t step) {
  if (!chunk_ || used_ >= chunk_->count()) {
    std::vector<CompletedChunk> completed;
    if (chunk_) {
      CompletedChunk done;
      done.set_id(chunk_->id());
      done.set_last_step(last_step_);
      completed.push_back(done);
      chunk_.reset();
    }
    PSTRAIN_ASSIGN_OR_RETURN(const bool lent, Borrow(std::move(completed), &step));
    if (!lent) return std::nullopt;
  }
  const Batch batch{chunk_->epoch(), chunk_->first() + used_, step};
  used_ += options_.batch_examples;
  last_step_ = step;
  examples_ += options_.batch_examples;
  return batch;
}

absl::StatusOr<bool> ChunkFeed::Borrow(std::vector<CompletedChunk> completed, int64_t* step) {
  const absl::Time give_up = absl::Now() + options_.wait_limit;
  bool paused = false;
  while (true) {
    absl::StatusOr<ChunkResponse> answer = exchange_(completed);
    if (!answer.ok()) return answer.status();
    completed.clear();  // reported
    if (answer->has_chunk()) {
      if (answer->chunk().count() <= 0 || answer->chunk().count() % options_.batch_examples != 0) {
        return absl::InternalError(absl::StrCat("data ledger: chunk ", answer->chunk().id(), " holds ",
                                                answer->chunk().count(), " examples, not whole batches of ",
                                                options_.batch_examples));
      }
      if (paused && options_.resume) {
        PSTRAIN_ASSIGN_OR_RETURN(*step, options_.resume(*step));
      }
      chunk_ = answer->chunk();
      used_ = 0;
      return true;
    }
    if (answer->end()) return false;
    if (!paused && options_.pause) PSTRAIN_RETURN_IF_ERROR(options_.pause());
    paused = true;
    if (absl::Now() > give_up) {
      return absl::DeadlineExceededError(absl::StrCat("the data ledger (PS shard 0) said wait for ",
                                                      absl::FormatDuration(options_.wait_limit),
                                                      ": chunks held by other workers never came back"));
    }
    absl::SleepFor(options_.poll);
  }
}

void ChunkFeed::Forget() {
  chunk_.reset();
  used_ = 0;
}

}  // namespace pstrain
