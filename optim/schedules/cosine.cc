// cosine: learning_rate * (1 + cos(pi * step / total_steps)) / 2, reaching 0
// at the end of the run and staying there; the base rate when the run's
// length is unknown (total_steps 0).
#include <algorithm>
#include <cmath>

#include "optim/lr_schedule.h"

namespace pstrain {
namespace {

float CosineRate(const OptimizerConfig& c, int64_t step, int64_t total_steps) {
  if (total_steps <= 0) return c.learning_rate();
  const double progress = std::min<double>(1.0, static_cast<double>(step) / total_steps);
  return static_cast<float>(c.learning_rate() * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

const bool kRegistered = LrScheduleRegistry().Register("cosine", {CosineRate, nullptr});

}  // namespace
}  // namespace pstrain
