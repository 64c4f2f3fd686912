// distributed_replicated: every replica keeps a full copy; the worker first
// all-reduces its replicas' gradients (all_reduce_spec), then pushes ONE mean
// gradient to the parameter servers, which aggregate across workers; the new
// values are pulled back into every replica.
#include "worker/strategies/parameter_server.h"

namespace pstrain {
namespace {

const bool kRegistered = RegisterStrategy("distributed_replicated", [](const StrategyContext& context) {
  const std::string& spec = context.config->all_reduce_spec();
  return ParameterServerStrategy::Create(context, "distributed_replicated", spec.empty() ? "pscpu" : spec);
});

}  // namespace
}  // namespace pstrain
