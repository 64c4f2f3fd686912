// One push+pull round of `pstrain-bench ps` as the training pipeline runs it
// (worker/ps_pipeline.h): the push batches go out in order with at most
// `window_bytes` of pushes in flight and at most `pushes_per_shard` to one
// shard (a batch whose shard is busy lets later ones to other shards go
// first), and each batch is pulled as soon as its
// push is acknowledged, so the pulls of early batches come back while later
// batches are still being pushed. The window keeps a pull request from
// queueing behind the whole round's pushes on the same connection.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/ps_client.h"

namespace pstrain::bench {

// Pushes (at step 0, which async accepts) and pulls every batch of `client`
// once. `window_bytes` 0, `pushes_per_shard` 0: no limit. Returns the first
// error, or DeadlineExceeded when some batch is still unanswered after
// `timeout`; the callbacks own what they touch, so returning early is safe
// while `client` lives.
absl::Status PipelinedPushPull(PsClient& client, int64_t window_bytes, int pushes_per_shard, absl::Duration timeout);

}  // namespace pstrain::bench
