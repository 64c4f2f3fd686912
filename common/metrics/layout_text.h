// LayoutText: how a parameter-server transfer layout reads wherever people
// read it (the layout tuner's log lines and result.json's decisions,
// pstrain-compare's tuner summary): "batch 64 KiB, window 1 MiB, 1 per
// shard". Sizes are in MiB when they are whole MiB, in KiB otherwise; a
// window of 0 (no limit) reads "none".
#pragma once

#include <cstdint>
#include <string>

namespace pstrain {

std::string LayoutText(int64_t batch_bytes, int64_t window_bytes, int pushes_per_shard);

}  // namespace pstrain
