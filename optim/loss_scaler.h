// LossScaler: the scale a worker multiplies its loss by before backward, so
// that small gradients survive 16-bit arithmetic, and how that scale moves.
//
// The worker multiplies d(loss)/d(logits) by scale(), divides every gradient
// by it as backward finalises it, and tells Update() whether any gradient was
// then not finite (an overflow somewhere in backward). Modes (config
// `loss_scaling.mode`):
//   none     scale() is 1 and never moves; Update() never reports a skip.
//   static   scale() is initial_scale forever; an overflowed step is still
//            skipped and counted.
//   dynamic  as torch.cuda.amp.GradScaler and tf.keras's dynamic loss scale:
//            an overflowed step is skipped and the scale multiplied by
//            backoff_factor (never below kMinScale); growth_interval steps in
//            a row without an overflow multiply it by growth_factor (never
//            above kMaxScale, 2^120, short of float32's largest power of two).
// Scales that are powers of two (the defaults, from a power-of-two initial
// scale) make scaling and unscaling exact in float32 and bf16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/config/config_checks.h"
#include "proto/config.pb.h"

namespace pstrain {

// x[i] *= factor for the n floats at x; returns whether every one of them
// is then finite.
bool ScaleAndCheckFinite(float* x, int64_t n, float factor);
// Whether every one of the n floats at x is finite.
bool AllFinite(const float* x, int64_t n);

// Whether `config` scales the loss (its mode is not "none").
bool ScalesLoss(const LossScalingConfig& config);
// The config's loss_scaling fields, refused through `ck` naming the field:
// an unknown mode, or a scale, factor or interval out of range.
absl::Status CheckLossScalingConfig(const LossScalingConfig& config, const ConfigChecker& ck);

class LossScaler {
 public:
  enum class Mode { kNone, kStatic, kDynamic };
  static constexpr float kMinScale = 1.0f;
  static constexpr float kMaxScale = 0x1p+120f;

  // CheckLossScalingConfig's error for a config it refuses.
  static absl::StatusOr<LossScaler> Create(const LossScalingConfig& config);

  Mode mode() const { return mode_; }
  bool enabled() const { return mode_ != Mode::kNone; }
  float scale() const { return scale_; }
  // The step whose gradients were unscaled by scale() is over. Returns
  // whether its update may be applied: false when `overflowed` (and the
  // scaler is enabled). Moves the scale as the mode says.
  bool Update(bool overflowed);
  // Steps Update() said to skip so far.
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  LossScaler() = default;
  Mode mode_ = Mode::kNone;
  float scale_ = 1;
  float growth_factor_ = 2;
  float backoff_factor_ = 0.5f;
  int growth_interval_ = 2000;
  int clean_steps_ = 0;  // steps since the last overflow or growth
  int64_t skipped_steps_ = 0;
};

}  // namespace pstrain
