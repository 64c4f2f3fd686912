// In-worker gradient reduction across the replicas of one process
// (tf_cnn_benchmarks' all_reduce_spec for variable_update replicated).
//
// Both algorithms leave the MEAN gradient over the replicas in every
// replica's grad tensors; they differ in where the sum is formed:
//   "pscpu": every gradient is gathered into a host buffer, summed there and
//            copied back (local_reduce_pscpu.cc);
//   "none":  each variable's gradients are summed on one replica chosen
//            round-robin by variable index, then copied back to the others
//            (local_reduce_copy.cc).
// ("nccl" is the GPU all-reduce of the NCCL strategies, not a reduction
// here; on emulated devices in an emulated host it is "emulated_ring":
// local_reduce_ring.cc.)
//
// Over an emulated interconnect (ReplicaSet::interconnect(), device
// emulated with emulation.topology) each reduction computes nothing (the
// emulated devices' gradients are zeros and their values unread) and
// instead charges the interconnect what it moves, in its own order:
// pscpu a pass over host memory (the gradients came down in TrainStep),
// none and owner_device each variable's copies between the devices (and
// owner_device the sum's copy to the host), emulated_ring one ring
// all-reduce per variable. And for local_parameter_device gpu (parameter_server on GPUs):
//   "owner_device": each variable is summed on the replica that owns it
//            (GradientOwners: greedy, least-loaded by bytes) from peer copies
//            of the others' device gradients; the MEAN lands in replica 0's
//            variables(0) only (what a PS push reads), not in every replica
//            (local_reduce_device.cc). Needs ReplicaOptions::download_gradients
//            off, so the device gradients are the ones backward wrote.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/registry.h"
#include "worker/replica_set.h"

namespace pstrain {

// One variable's reduction of pscpu and none (LocalReduceEntry::reduce_one;
// ReduceGradients runs it for every variable in turn).
void ReduceGradientOnHost(ReplicaSet& replicas, int variable);
void ReduceGradientByCopy(ReplicaSet& replicas, int variable);
void ReduceGradientsOnOwnerDevices(ReplicaSet& replicas);
// Over an emulated interconnect: `bytes` from every replica but `owner` to
// `owner` (to_owner), or back from it to each of them, as one transfer.
std::vector<EmulatedInterconnect::Copy> OwnerCopies(int replicas, int owner, int64_t bytes, bool to_owner);
// The bytes of one replica's gradients, all variables.
int64_t GradientBytes(ReplicaSet& replicas);
// The replica owning each variable's reduction: greedy by gradient bytes.
std::vector<int> GradientOwners(ReplicaSet& replicas);
// The reductions by name, each registered from its own file (pscpu,
// none, owner_device); strategies take the all_reduce_spec values they
// accept from it.
struct LocalReduceEntry {
  // One line for documentation and messages.
  std::string summary;
  // A config may name it in all_reduce_spec (owner_device instead follows
  // from local_parameter_device).
  bool config_spec = true;
  // The whole reduction, for a reduction that is not variable by variable;
  // null when reduce_one is set (ReduceGradients then runs it on every
  // variable in turn).
  std::function<void(ReplicaSet&)> reduce;
  // When set, one variable's reduction on its own: strategies may run it as
  // soon as every replica's gradient of that variable is final
  // (OverlappedReduce).
  std::function<void(ReplicaSet&, int variable)> reduce_one;
};
Registry<LocalReduceEntry>& LocalReduceRegistry();
// The registered reductions a config may name, sorted.
std::vector<std::string> LocalReduceSpecs();
// Runs the reduction `all_reduce_spec` names; "" means "pscpu".
// InvalidArgument listing the known ones for any other name.
absl::Status ReduceGradients(const std::string& all_reduce_spec, ReplicaSet& replicas);

}  // namespace pstrain
