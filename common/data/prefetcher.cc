#include "common/data/prefetcher.h"

#include <utility>

namespace pstrain {

BatchPrefetcher::BatchPrefetcher(const ShardedBatcher* batcher, DecodePool* pool, int depth)
    : batcher_(batcher), pool_(pool), depth_(depth < 1 ? 1 : depth), thread_([this] { Loop(); }) {}

BatchPrefetcher::~BatchPrefetcher() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::Status BatchPrefetcher::Next(int64_t step, Tensor* images, std::vector<int32_t>* labels) {
  std::unique_ptr<Slot> slot;
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty() && queue_.front()->step == step) {
      const absl::Time start = absl::Now();
      mu_.Await(absl::Condition(&queue_.front()->ready));
      waited_ += absl::Now() - start;
      slot = std::move(queue_.front());
      queue_.pop_front();
    } else {
      // The steps jumped: drop what was queued (the background thread may be
      // filling the front one; it only touches slots it owns, see Loop).
      while (!queue_.empty() && queue_.front()->ready) queue_.pop_front();
    }
  }
  absl::Status status;
  if (slot != nullptr) {
    std::swap(*images, slot->images);
    std::swap(*labels, slot->labels);
    status = slot->status;
  } else {
    const absl::Time start = absl::Now();
    status = batcher_->Fill(step, images, labels, pool_);
    absl::MutexLock lock(&mu_);
    waited_ += absl::Now() - start;
  }
  absl::MutexLock lock(&mu_);
  if (slot != nullptr) spare_.push_back(std::move(slot));
  QueueAfter(step);
  return status;
}

void BatchPrefetcher::QueueAfter(int64_t step) {
  // Slots of earlier or unrelated steps are dropped once ready.
  std::deque<std::unique_ptr<Slot>> kept;
  for (auto& s : queue_) {
    if (s->step > step || !s->ready) kept.push_back(std::move(s));
  }
  queue_ = std::move(kept);
  int64_t next = queue_.empty() ? step + 1 : queue_.back()->step + 1;
  while (static_cast<int>(queue_.size()) < depth_) {
    std::unique_ptr<Slot> s;
    if (spare_.empty()) {
      s = std::make_unique<Slot>();
    } else {
      s = std::move(spare_.back());
      spare_.pop_back();
    }
    s->step = next++;
    s->ready = false;
    s->status = absl::OkStatus();
    queue_.push_back(std::move(s));
  }
}

void BatchPrefetcher::Loop() {
  while (true) {
    Slot* slot = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (stop_) return true;
        for (auto& s : queue_) {
          if (!s->ready) return true;
        }
        return false;
      };
      mu_.Await(absl::Condition(&work));
      if (stop_) return;
      for (auto& s : queue_) {
        if (!s->ready) {
          slot = s.get();
          break;
        }
      }
    }
    // Only this thread fills slots, and a slot leaves the queue only once
    // ready, so `slot` stays valid while it is filled without the lock.
    absl::Status status = batcher_->Fill(slot->step, &slot->images, &slot->labels, pool_);
    absl::MutexLock lock(&mu_);
    slot->status = std::move(status);
    slot->ready = true;
  }
}

absl::Duration BatchPrefetcher::wait_time() const {
  absl::MutexLock lock(&mu_);
  return waited_;
}

}  // namespace pstrain
