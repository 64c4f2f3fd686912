#include "tools/storm/storm_recovery.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace pstrain::storm {

std::optional<int64_t> ChiefStep(absl::string_view line) {
  constexpr absl::string_view kPrefix = "[worker0] ";
  if (!absl::StartsWith(line, kPrefix)) return std::nullopt;
  line.remove_prefix(kPrefix.size());
  const size_t tab = line.find('\t');
  if (tab == absl::string_view::npos || !absl::StartsWith(line.substr(tab + 1), "images/sec")) return std::nullopt;
  int64_t step = 0;
  if (!absl::SimpleAtoi(line.substr(0, tab), &step)) return std::nullopt;
  return step;
}

std::vector<std::optional<double>> RecoverySeconds(const std::vector<absl::Time>& faults,
                                                   const std::vector<ProgressSample>& progress, int64_t advance) {
  std::vector<std::optional<double>> seconds;
  for (const absl::Time fault : faults) {
    // A fault before the chief's first progress line (training not started
    // yet, e.g. on a loaded machine) counts from step 0.
    int64_t before = 0;
    std::optional<double> recovered;
    for (const ProgressSample& p : progress) {
      if (p.at <= fault) {
        before = std::max(before, p.step);
      } else if (p.step >= before + advance) {
        recovered = absl::ToDoubleSeconds(p.at - fault);
        break;
      }
    }
    seconds.push_back(recovered);
  }
  return seconds;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

}  // namespace pstrain::storm
