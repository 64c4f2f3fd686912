// constant: learning_rate at every step.
#include "optim/lr_schedule.h"

namespace pstrain {
namespace {

const bool kRegistered = LrScheduleRegistry().Register(
    "constant", {[](const OptimizerConfig& c, int64_t, int64_t) { return c.learning_rate(); }, nullptr});

}  // namespace
}  // namespace pstrain
