// ReplicaSet: the model replicas of one worker process (devices_per_worker).
//
// Each replica has its own DeviceContext (on CPU: its own oneDNN stream) and
// runs on its own thread with an equal share of the process's OpenMP threads,
// so replicas compute concurrently like GPUs of one machine. Replica r of
// worker w reads the (w * N + r)-th slice of each global batch.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace pstrain {

class ReplicaSet {
 public:
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Create(const ModelConfig& config, int replicas);
  ~ReplicaSet();

  int size() const { return static_cast<int>(models_.size()); }
  Model& model(int r) { return *models_[r]; }
  std::vector<Variable>& variables(int r) { return models_[r]->variables(); }

  // Runs fn(r) for every replica concurrently and waits for all. With one
  // replica it runs inline on the caller's thread.
  void ForEach(const std::function<void(int replica)>& fn);

  // Copies replica `from`'s variable values into every other replica.
  void BroadcastValues(int from);

 private:
  ReplicaSet() = default;
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
  std::vector<std::unique_ptr<Model>> models_;
  int threads_per_replica_ = 1;
};

}  // namespace pstrain
