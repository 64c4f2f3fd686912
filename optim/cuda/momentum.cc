// Momentum on the GPU: optim/momentum.cc's update, one kernel per call
// (ApplyAll: one for every variable).
#include "optim/cuda/chunk_table.h"
#include "optim/cuda/optimizer_kernels.h"
#include "optim/optimizer.h"

namespace pstrain {
namespace {

class CudaMomentum : public Optimizer {
 public:
  CudaMomentum(const OptimizerConfig& config, DeviceStream stream)
      : momentum_(config.momentum()),
        weight_decay_(config.weight_decay()),
        stream_(static_cast<cudaStream_t>(stream)) {}
  int num_slots() const override { return 1; }
  void Apply(const float* w, const float* g, int64_t n, const OptimizerStep& step, float* const* slots,
             float* out) const override {
    cuda::MomentumKernel(w, g, n, step.learning_rate, step.gradient_scale, momentum_, weight_decay_, slots[0], out,
                         stream_);
  }
  void ApplyAll(absl::Span<const VariableUpdate> variables, const OptimizerStep& step) const override {
    int count = 0;
    const cuda::DeviceChunk* chunks = table_.Upload(variables, /*slot=*/0, stream_, &count);
    cuda::MultiMomentumKernel(chunks, count, step.learning_rate, step.gradient_scale, momentum_, weight_decay_,
                              stream_);
  }

 private:
  float momentum_;
  float weight_decay_;
  cudaStream_t stream_;
  mutable cuda::ChunkTable table_;  // ApplyAll's; one thread at a time
};

const bool kRegistered =
    OptimizerRegistry(DeviceKind::kCuda).Register("momentum", [](const OptimizerConfig& c, DeviceStream s) {
      return std::unique_ptr<Optimizer>(new CudaMomentum(c, s));
    });

}  // namespace
}  // namespace pstrain
