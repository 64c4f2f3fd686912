// step: learning_rate * lr_decay_factor ^ floor(step / lr_decay_steps), as
// tf.train.exponential_decay(staircase=True). lr_decay_steps 0: no decay.
#include <cmath>

#include "common/status_macros.h"
#include "optim/lr_schedule.h"

namespace pstrain {
namespace {

float StepRate(const OptimizerConfig& c, int64_t step, int64_t) {
  if (c.lr_decay_steps() <= 0) return c.learning_rate();
  return c.learning_rate() * std::pow(c.lr_decay_factor(), static_cast<float>(step / c.lr_decay_steps()));
}

absl::Status CheckStep(const OptimizerConfig& c, const ConfigChecker& ck) {
  if (c.lr_decay_steps() <= 0) {
    return ck.Fail("optimizer.lr_decay_steps", "a number > 0 when lr_schedule is step",
                   ConfigChecker::Num(c.lr_decay_steps()));
  }
  return ck.InRange("optimizer.lr_decay_factor", c.lr_decay_factor(), 0.0f, false, 1.0f, true);
}

const bool kRegistered = LrScheduleRegistry().Register("step", {StepRate, CheckStep});

}  // namespace
}  // namespace pstrain
