// The chief's lines about stragglers (StragglerLines, straggler_lines.h).
#include "worker/run/observers/straggler_lines.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace pstrain {

void StragglerLines::OnStepEnd(const StepOutcome& outcome) {
  std::map<int, Straggler> now;
  for (Straggler& s : shards_->stragglers()) now.emplace(s.worker(), std::move(s));
  for (const auto& [worker, s] : now) {
    if (named_.count(worker) > 0) continue;
    out_ << absl::StrFormat(
                "straggler: worker %d is %.2fx slower than the others (its busy time per step, waits excluded; named "
                "at its step %d)",
                worker, s.ratio(), s.named_at_step())
         << std::endl;
  }
  for (const auto& [worker, s] : named_) {
    if (now.count(worker) == 0)
      out_ << "straggler: worker " << worker << " keeps pace again (step " << outcome.step << ")" << std::endl;
  }
  named_ = std::move(now);
}

}  // namespace pstrain
