#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

std::vector<std::string> LossScaler::ModeNames() { return {"none", "static", "dynamic"}; }

absl::StatusOr<LossScaler> LossScaler::Create(const LossScalingConfig& config) {
  auto field_error = [](const std::string& field, const std::string& expected, const std::string& got) {
    return absl::InvalidArgumentError(
        absl::StrCat("field 'loss_scaling.", field, "': expected ", expected, ", got ", got));
  };
  LossScaler scaler;
  if (config.mode() == "none") {
    return scaler;
  } else if (config.mode() == "static") {
    scaler.mode_ = Mode::kStatic;
  } else if (config.mode() == "dynamic") {
    scaler.mode_ = Mode::kDynamic;
  } else {
    return field_error("mode", absl::StrCat("one of ", absl::StrJoin(ModeNames(), ", ")),
                       absl::StrCat("'", config.mode(), "'"));
  }
  const float initial = config.initial_scale();
  if (!std::isfinite(initial) || initial < kMinScale || initial > kMaxScale) {
    return field_error("initial_scale", absl::StrCat("a number in [", kMinScale, ", 2^120]"), absl::StrCat(initial));
  }
  scaler.scale_ = initial;
  if (scaler.mode_ == Mode::kStatic) return scaler;
  if (!std::isfinite(config.growth_factor()) || config.growth_factor() <= 1) {
    return field_error("growth_factor", "a number > 1", absl::StrCat(config.growth_factor()));
  }
  if (!std::isfinite(config.backoff_factor()) || config.backoff_factor() <= 0 || config.backoff_factor() >= 1) {
    return field_error("backoff_factor", "a number in (0, 1)", absl::StrCat(config.backoff_factor()));
  }
  if (config.growth_interval() <= 0) {
    return field_error("growth_interval", "a number > 0", absl::StrCat(config.growth_interval()));
  }
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
