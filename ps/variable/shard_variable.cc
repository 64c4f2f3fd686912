#include "ps/variable/shard_variable.h"

#include <algorithm>

#include "common/status_macros.h"
#include "common/transport/shared_values.h"

namespace pstrain {

VariableLocks::VariableLocks(std::vector<ShardVariable*> vars) : vars_(std::move(vars)) {
  std::sort(vars_.begin(), vars_.end(),
            [](const ShardVariable* a, const ShardVariable* b) { return a->name < b->name; });
  for (ShardVariable* v : vars_) v->mu.Lock();
}

void VariableLocks::Release() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  for (auto it = vars_.rbegin(); it != vars_.rend(); ++it) (*it)->mu.Unlock();
  vars_.clear();
}

std::shared_ptr<Buffer> VariableUpdater::NextBuffer(ShardVariable& var) {
  if (var.spare != nullptr) {
    // use_count() is a relaxed read: seeing the pulls' references gone does
    // not order their reads of the bytes before our writes. Copying the
    // pointer is an acquire-release increment of the same count, which
    // follows (and so synchronises with) the last reader's release; two
    // owners then mean that nobody else holds the spare, and nobody can take
    // it anew (only var, under var.mu, hands it out).
    const std::shared_ptr<Buffer> probe = var.spare;
    if (probe.use_count() == 2) return std::move(var.spare);
  }
  // The update writes every element. In the process's SharedValues when it
  // has room, so that colocated workers' pulls read it in place.
  return AllocateShareableValue(var.bytes());
}

void VariableUpdater::Publish(ShardVariable& var, std::shared_ptr<Buffer> next) {
  var.spare = std::move(var.value);
  var.value = std::move(next);
  var.version.fetch_add(1);
}

absl::Status VariableUpdater::ApplyFromWire(ShardVariable& var, IncomingFrame& payload, int64_t global_step) const {
  std::shared_ptr<Buffer> next = NextBuffer(var);
  const float lr = schedule_.At(global_step);
  const float* old_value = static_cast<const float*>(var.value->data());
  float* new_value = static_cast<float*>(next->data());
  // The lambda runs under var.mu too (the analysis cannot see into it).
  std::vector<float>* const slot_arrays = var.slots.data();
  std::vector<float*> slots(var.slots.size());
  absl::Status read = payload.ConsumeFloats(var.bytes(), [&](size_t first, const float* g, size_t count) {
    for (size_t s = 0; s < slots.size(); ++s) slots[s] = slot_arrays[s].data() + first;
    optimizer_->Apply(old_value + first, g, static_cast<int64_t>(count), {.learning_rate = lr}, slots.data(),
                      new_value + first);
  });
  // Unreachable for a validated push (its payload size was checked before
  // anything changed); should it happen, the value and version stay as they
  // were.
  PSTRAIN_RETURN_IF_ERROR(read);
  Publish(var, std::move(next));
  return absl::OkStatus();
}

void VariableUpdater::ApplyMean(ShardVariable& var, const std::vector<float>& sum, int count,
                                int64_t global_step) const {
  std::shared_ptr<Buffer> next = NextBuffer(var);
  std::vector<float*> slots;
  for (auto& slot : var.slots) slots.push_back(slot.data());
  // The mean is taken inside the optimizer's pass (gradient_scale).
  const OptimizerStep step{.learning_rate = schedule_.At(global_step),
                           .gradient_scale = 1.0f / static_cast<float>(count)};
  optimizer_->Apply(static_cast<const float*>(var.value->data()), sum.data(), var.n, step, slots.data(),
                    static_cast<float*>(next->data()));
  Publish(var, std::move(next));
}

}  // namespace pstrain
