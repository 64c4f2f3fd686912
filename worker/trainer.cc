#include "worker/trainer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/run/training_run.h"

namespace pstrain {

int64_t TotalSteps(const ExperimentConfig& config, int64_t train_examples) {
  if (config.train().steps() > 0) return config.train().steps();
  const int64_t global_batch =
      static_cast<int64_t>(config.train().batch_size_per_device()) * config.cluster().worker_hosts_size();
  const int64_t per_epoch = std::max<int64_t>(1, train_examples / global_batch);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(config.train().epochs() * per_epoch)));
}

absl::StatusOr<RunResult> RunWorker(const ExperimentConfig& config, int worker_index, Transport* transport,
                                    const WorkerRunOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run,
                           TrainingRun::Create(config, worker_index, transport, options));
  return run->Run();
}

}  // namespace pstrain
