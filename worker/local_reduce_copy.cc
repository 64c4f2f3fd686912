// none: for variable v, replica v % N sums everyone's gradient (copying each
// in), scales it, and copies the mean back to the others; variable by
// variable, each as soon as every replica's gradient of it is final
// (OverlappedReduce).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/local_reduce.h"

namespace pstrain {

void ReduceGradientByCopy(ReplicaSet& replicas, int variable) {
  const int n = replicas.size();
  if (n == 1) return;
  const int owner = variable % n;
  if (EmulatedInterconnect* interconnect = replicas.interconnect()) {
    // The others' gradients to the owner at once, then the mean back to them
    // at once (the sum on the owner is device compute, not modelled).
    const int64_t bytes = static_cast<int64_t>(replicas.variables(0)[variable].grad.num_bytes());
    interconnect->Transfer(OwnerCopies(n, owner, bytes, /*to_owner=*/true));
    interconnect->Transfer(OwnerCopies(n, owner, bytes, /*to_owner=*/false));
    return;
  }
  const float scale = 1.0f / static_cast<float>(n);
  Tensor& sum = replicas.variables(owner)[variable].grad;
  float* s = sum.data();
  const int64_t count = sum.num_elements();
  for (int r = 0; r < n; ++r) {
    if (r == owner) continue;
    const float* g = replicas.variables(r)[variable].grad.data();
    for (int64_t i = 0; i < count; ++i) s[i] += g[i];
  }
  for (int64_t i = 0; i < count; ++i) s[i] *= scale;
  for (int r = 0; r < n; ++r) {
    if (r != owner) replicas.variables(r)[variable].grad.CopyFrom(sum);
  }
}

std::vector<EmulatedInterconnect::Copy> OwnerCopies(int replicas, int owner, int64_t bytes, bool to_owner) {
  std::vector<EmulatedInterconnect::Copy> copies;
  for (int r = 0; r < replicas; ++r) {
    if (r == owner) continue;
    copies.push_back(to_owner ? EmulatedInterconnect::Copy{r, owner, bytes}
                              : EmulatedInterconnect::Copy{owner, r, bytes});
  }
  return copies;
}

int64_t GradientBytes(ReplicaSet& replicas) {
  int64_t bytes = 0;
  for (const Variable& v : replicas.variables(0)) bytes += static_cast<int64_t>(v.grad.num_bytes());
  return bytes;
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
  if (entry->reduce) {
    entry->reduce(replicas);
    return absl::OkStatus();
  }
  for (size_t v = 0; v < replicas.variables(0).size(); ++v) entry->reduce_one(replicas, static_cast<int>(v));
  return absl::OkStatus();
}

namespace {

const bool kRegistered =
    LocalReduceRegistry().Register("none", {"each variable summed on one replica chosen round-robin, copied back", true,
                                            /*reduce=*/nullptr, ReduceGradientByCopy});

}  // namespace
}  // namespace pstrain
