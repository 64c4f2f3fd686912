#include "worker/run/trainer.h"

#include "common/status_macros.h"
#include "worker/run/training_run.h"

namespace pstrain {

absl::StatusOr<RunResult> RunWorker(const ExperimentConfig& config, int worker_index, Transport* transport,
                                    const WorkerRunOptions& options) {
  PSTRAIN_ASSIGN_OR_RETURN(std::unique_ptr<TrainingRun> run,
                           TrainingRun::Create(config, worker_index, transport, options));
  return run->Run();
}

}  // namespace pstrain
