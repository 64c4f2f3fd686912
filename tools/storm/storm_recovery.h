// How long training took to recover from each fault of a storm, from the
// chief's progress lines ("[worker0] <step>\t..." as pstrain-launch echoes
// them): the time from the fault until the chief printed a step at least
// `advance` steps past the last one it had printed before the fault. Under
// a fault that does not stall training this is about the time those steps
// take; under one that does, the stall too.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pstrain::storm {

struct ProgressSample {
  absl::Time at;
  int64_t step = 0;
};

// The step of a chief progress line as pstrain-launch echoes it
// ("[worker0] 120\timages/sec: ..."); nullopt for any other line.
std::optional<int64_t> ChiefStep(absl::string_view line);

// Per fault (its time): seconds until the chief's progress passed `advance`
// steps beyond its last sample at or before the fault (step 0 when the fault
// came before the chief's first line); nullopt when it never did (the run
// ended first).
std::vector<std::optional<double>> RecoverySeconds(const std::vector<absl::Time>& faults,
                                                   const std::vector<ProgressSample>& progress, int64_t advance);

// The q-quantile (0..1) of `values` by the nearest-rank rule; 0 when empty.
double Quantile(std::vector<double> values, double q);

}  // namespace pstrain::storm
