#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/status_macros.h"

namespace pstrain {

bool ScaleAndCheckFinite(float* x, int64_t n, float factor) {
  // inf * 0 and nan * 0 are nan, so the sum is nan exactly when some
  // element is not finite; one vectorised pass.
  float probe = 0;
#pragma omp simd reduction(+ : probe)
  for (int64_t i = 0; i < n; ++i) {
    x[i] *= factor;
    probe += x[i] * 0.0f;
  }
  return !std::isnan(probe);
}

bool AllFinite(const float* x, int64_t n) {
  float probe = 0;
#pragma omp simd reduction(+ : probe)
  for (int64_t i = 0; i < n; ++i) probe += x[i] * 0.0f;
  return !std::isnan(probe);
}

bool ScalesLoss(const LossScalingConfig& config) { return config.mode() != LossScalingConfig::none; }

absl::Status CheckLossScalingConfig(const LossScalingConfig& config, const ConfigChecker& ck) {
  if (!ScalesLoss(config)) return absl::OkStatus();
  PSTRAIN_RETURN_IF_ERROR(ck.InRange("loss_scaling.initial_scale", config.initial_scale(), LossScaler::kMinScale, true,
                                     LossScaler::kMaxScale, true));
  if (config.mode() == LossScalingConfig::static_) return absl::OkStatus();
  const float growth = config.growth_factor();
  if (!std::isfinite(growth) || growth <= 1) {
    return ck.Fail("loss_scaling.growth_factor", "a number > 1", ConfigChecker::Num(growth));
  }
  PSTRAIN_RETURN_IF_ERROR(ck.InRange("loss_scaling.backoff_factor", config.backoff_factor(), 0.0f, false, 1.0f, false));
  return ck.Positive("loss_scaling.growth_interval", config.growth_interval());
}

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalingConfig& config) {
  PSTRAIN_RETURN_IF_ERROR(CheckLossScalingConfig(config, ConfigChecker("config")));
  LossScaler scaler;
  switch (config.mode()) {
    case LossScalingConfig::none:
      scaler.mode_ = Mode::kNone;
      break;
    case LossScalingConfig::static_:
      scaler.mode_ = Mode::kStatic;
      break;
    case LossScalingConfig::dynamic:
      scaler.mode_ = Mode::kDynamic;
      break;
  }
  if (scaler.mode_ == Mode::kNone) return scaler;
  scaler.scale_ = config.initial_scale();
  scaler.growth_factor_ = config.growth_factor();
  scaler.backoff_factor_ = config.backoff_factor();
  scaler.growth_interval_ = config.growth_interval();
  return scaler;
}

bool LossScaler::Update(bool overflowed) {
  if (mode_ == Mode::kNone) return true;
  if (overflowed) {
    ++skipped_steps_;
    clean_steps_ = 0;
    if (mode_ == Mode::kDynamic) scale_ = std::max(kMinScale, scale_ * backoff_factor_);
    return false;
  }
  if (mode_ == Mode::kDynamic && ++clean_steps_ >= growth_interval_) {
    clean_steps_ = 0;
    scale_ = std::min(kMaxScale, scale_ * growth_factor_);
  }
  return true;
}

}  // namespace pstrain
