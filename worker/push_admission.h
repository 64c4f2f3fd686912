// Which pushes may go now (ps_scheduling.window_bytes, pushes_per_shard):
// the pipeline's rule, shared with `pstrain-bench ps`'s push+pull rounds.
//
// At most `window_bytes` of pushes in flight (0: no limit; a push always goes
// when none is in flight, however large), and at most `pushes_per_shard` to
// one shard (0: no limit), one more to a colocated shard (one this worker
// reaches without crossing a link: the limit keeps pushes from sharing a
// link, and where there is none the worker copies the next push in while
// the shard applies the last, instead of waiting for its answer). Walk the
// pushes in priority order: a push whose shard is busy is skipped (the next
// one, to another shard, may go), a full window stops the walk. Not
// thread-safe: its owner's lock guards it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace pstrain {

class PushAdmission {
 public:
  enum class Verdict { kSend, kShardBusy, kWindowFull };

  PushAdmission() = default;
  PushAdmission(int64_t window_bytes, int pushes_per_shard, int num_shards, std::vector<bool> colocated = {}) {
    Configure(window_bytes, pushes_per_shard, num_shards, std::move(colocated));
  }

  // New limits and shard count; nothing in flight. `colocated`: per shard,
  // whether it is colocated (empty: none is).
  void Configure(int64_t window_bytes, int pushes_per_shard, int num_shards, std::vector<bool> colocated = {}) {
    window_bytes_ = window_bytes;
    pushes_per_shard_ = pushes_per_shard;
    colocated_ = std::move(colocated);
    colocated_.resize(num_shards, false);
    shard_in_flight_.assign(num_shards, 0);
    busy_shards_ = 0;
    bytes_in_flight_ = 0;
  }

  // The most pushes in flight to `shard`; 0: no limit.
  int LimitOf(int shard) const {
    if (pushes_per_shard_ <= 0) return 0;
    return pushes_per_shard_ + (colocated_[shard] ? 1 : 0);
  }

  // Whether a push of `bytes` to `shard` may go now; kSend counts it in flight.
  Verdict Admit(int64_t bytes, int shard) {
    if (window_bytes_ > 0 && bytes_in_flight_ > 0 && bytes_in_flight_ + bytes > window_bytes_) {
      return Verdict::kWindowFull;
    }
    const int limit = LimitOf(shard);
    if (limit > 0 && shard_in_flight_[shard] >= limit) return Verdict::kShardBusy;
    if (++shard_in_flight_[shard] == limit) ++busy_shards_;
    bytes_in_flight_ += bytes;
    return Verdict::kSend;
  }

  // A push admitted earlier was answered.
  void Done(int64_t bytes, int shard) {
    if (shard_in_flight_[shard]-- == LimitOf(shard)) --busy_shards_;
    bytes_in_flight_ -= bytes;
  }

  // Nothing in flight any more (the step was abandoned).
  void Clear() {
    std::fill(shard_in_flight_.begin(), shard_in_flight_.end(), 0);
    busy_shards_ = 0;
    bytes_in_flight_ = 0;
  }

  // No push can go until one is answered: every shard busy, or the window
  // full (judged without the next push's size: at least the window in flight).
  bool Saturated() const {
    if (window_bytes_ > 0 && bytes_in_flight_ >= window_bytes_) return true;
    return pushes_per_shard_ > 0 && busy_shards_ == static_cast<int>(shard_in_flight_.size());
  }

  int64_t bytes_in_flight() const { return bytes_in_flight_; }

 private:
  int64_t window_bytes_ = 0;
  int pushes_per_shard_ = 0;
  std::vector<bool> colocated_;  // [shard]
  std::vector<int> shard_in_flight_;
  int busy_shards_ = 0;  // shards with LimitOf(shard) in flight
  int64_t bytes_in_flight_ = 0;
};

}  // namespace pstrain
