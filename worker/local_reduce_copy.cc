// none: for variable v, replica v % N sums everyone's gradient (copying each
// in), scales it, and copies the mean back to the others.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/local_reduce.h"

namespace pstrain {

void ReduceGradientsByCopy(ReplicaSet& replicas) {
  const int n = replicas.size();
  if (n == 1) return;
  const float scale = 1.0f / static_cast<float>(n);
  const size_t num_vars = replicas.variables(0).size();
  for (size_t v = 0; v < num_vars; ++v) {
    const int owner = static_cast<int>(v % n);
    Tensor& sum = replicas.variables(owner)[v].grad;
    float* s = sum.data();
    const int64_t count = sum.num_elements();
    for (int r = 0; r < n; ++r) {
      if (r == owner) continue;
      const float* g = replicas.variables(r)[v].grad.data();
      for (int64_t i = 0; i < count; ++i) s[i] += g[i];
    }
    for (int64_t i = 0; i < count; ++i) s[i] *= scale;
    for (int r = 0; r < n; ++r) {
      if (r != owner) replicas.variables(r)[v].grad.CopyFrom(sum);
    }
  }
}

Registry<LocalReduceEntry>& LocalReduceRegistry() {
  static auto* registry = new Registry<LocalReduceEntry>("in-worker reduction (all_reduce_spec)");
  return *registry;
}

std::vector<std::string> LocalReduceSpecs() {
  std::vector<std::string> specs;
  for (const std::string& name : LocalReduceRegistry().Names()) {
    if (LocalReduceRegistry().Find(name)->config_spec) specs.push_back(name);
  }
  return specs;
}

absl::Status ReduceGradients(const std::string& spec, ReplicaSet& replicas) {
  absl::StatusOr<LocalReduceEntry> entry = LocalReduceRegistry().Find(spec.empty() ? "pscpu" : spec);
  if (!entry.ok()) return absl::InvalidArgumentError(entry.status().message());
  entry->reduce(replicas);
  return absl::OkStatus();
}

namespace {

const bool kRegistered = LocalReduceRegistry().Register(
    "none", {"each variable summed on one replica chosen round-robin, copied back", true, ReduceGradientsByCopy});

}  // namespace
}  // namespace pstrain
