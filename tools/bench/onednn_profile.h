// Where a training step's time goes, by layer type: oneDNN's verbose mode
// prints a line per primitive execution ("onednn_verbose,exec,cpu,
// <primitive>,<impl>,<prop>,<mds>,<attrs>,<aux>,<problem>,<ms>"); each is
// attributed to a layer type (convolution -> conv2d, pooling ->
// max_pool/avg_pool/global_avg_pool, inner_product -> dense, ...) and a
// phase: forward (before the loss's softmax), loss, or backward (after it).
// Convolutions and inner products are split by pass (forward,
// backward_data, backward_weights) with their FLOPs. CPU only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pstrain::bench {

// One row of the profile: a layer type in one phase (and, for convolutions
// and inner products, one pass).
struct ProfileRow {
  std::string layer_type;  // "conv2d", "batch_norm", "relu", "reorder", ...
  std::string phase;       // "forward", "loss" or "backward"
  std::string pass;        // oneDNN prop kind ("forward_training", "backward_data", ...) or "" when merged
  double ms_per_step = 0;
  double calls_per_step = 0;
  double gflop_per_step = 0;    // convolutions and inner products only, else 0
  std::string implementations;  // oneDNN implementations seen, e.g. "jit:avx2,gemm:jit"
};

struct OnednnProfile {
  std::vector<ProfileRow> rows;  // by ms_per_step, largest first
  double step_ms = 0;            // wall time per profiled step
  double dnnl_ms = 0;            // inside oneDNN primitives per profiled step
};

// Runs `step` `steps` (> 0) times with oneDNN's verbose mode on and its
// output captured from stdout (file descriptor 1: nothing else may write to
// stdout meanwhile), and attributes it. Internal when stdout cannot be
// redirected.
absl::StatusOr<OnednnProfile> ProfileOnednnSteps(int64_t steps, const std::function<void()>& step);

// The rows of `steps` steps' worth of verbose output, per step; sets
// `dnnl_ms_per_step` to the time inside primitives per step.
std::vector<ProfileRow> ParseOnednnVerbose(const std::string& text, int64_t steps, double* dnnl_ms_per_step);

}  // namespace pstrain::bench
