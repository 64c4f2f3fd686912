// The NCCL strategy: variables stay on the GPUs and gradients are all-reduced
// there with NCCL (worker/strategies/nccl_allreduce.cc). Not a strategy of its
// own: the strategies that run on it say which scope they want.
//   kOneWorker    the GPUs of one worker (replicated, all_reduce_spec nccl)
//   kAllWorkers   every GPU of every worker (allreduce on device gpu)
//   kNone         no collective at all: every GPU replica applies its own
//                 gradients on its device (independent on device gpu)
// Every other strategy on GPU works on pinned host mirrors (ReplicaSet); these
// need none (StrategyNeeds::host_mirrors false).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "worker/strategy.h"

namespace pstrain {

enum class NcclScope { kOneWorker, kAllWorkers, kNone };

// Unimplemented in a build without CUDA.
absl::StatusOr<std::unique_ptr<Strategy>> CreateNcclStrategy(const StrategyContext& context, NcclScope scope);

}  // namespace pstrain
