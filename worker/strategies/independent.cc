// independent: no synchronisation at all. Every replica trains its own copy
// on its own data and applies its own gradients: the throughput ceiling the
// synchronising strategies are compared against. The chief evaluates its
// replica 0. Only one worker (several would have no way to report).
#include "absl/strings/str_cat.h"
#include "worker/strategies/local_replicas.h"

namespace pstrain {
namespace {

const bool kRegistered = RegisterStrategy("independent", [](const StrategyContext& context) {
  return LocalReplicasStrategy::Create(
      context, std::nullopt, absl::StrCat("independent (", context.replicas->size(), " replicas, no synchronisation)"),
      "variable_update independent runs the devices of one worker; give it one worker_host");
});

}  // namespace
}  // namespace pstrain
