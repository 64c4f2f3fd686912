#include "worker/replica_set.h"

#include <omp.h>

#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<ReplicaSet>> ReplicaSet::Create(const ModelConfig& config, int replicas) {
  if (replicas < 1) return absl::InvalidArgumentError("devices_per_worker must be >= 1");
  std::unique_ptr<ReplicaSet> set(new ReplicaSet);
  for (int r = 0; r < replicas; ++r) {
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceContext> context, CreateDeviceContext(Device::Cpu()));
    PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config, context.get()));
    set->contexts_.push_back(std::move(context));
    set->models_.push_back(std::move(model));
  }
  set->threads_per_replica_ = std::max(1, omp_get_max_threads() / replicas);
  return set;
}

ReplicaSet::~ReplicaSet() {
  models_.clear();  // models use their contexts
  contexts_.clear();
}

void ReplicaSet::ForEach(const std::function<void(int)>& fn) {
  if (size() == 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < size(); ++r) {
    threads.emplace_back([this, r, &fn] {
      omp_set_num_threads(threads_per_replica_);  // this thread's OpenMP team size
      fn(r);
    });
  }
  for (std::thread& t : threads) t.join();
}

void ReplicaSet::BroadcastValues(int from) {
  std::vector<Variable>& source = variables(from);
  for (int r = 0; r < size(); ++r) {
    if (r == from) continue;
    std::vector<Variable>& target = variables(r);
    for (size_t v = 0; v < source.size(); ++v) target[v].value.CopyFrom(source[v].value);
  }
}

}  // namespace pstrain
