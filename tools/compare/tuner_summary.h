// The layout tuner's course in a comparison (results.md, "The layout
// tuner"): for each run whose chief tuned its pipeline (result.json
// workers[0].layout_tuning), where the search settled, how fast a step then
// was against the fastest run without a tuner, and how long each re-tune
// took to settle again.
#pragma once

#include <string>
#include <vector>

#include "tools/compare/report.h"

namespace pstrain::compare {

// Markdown lines, one bullet per tuned run; "" when no run tuned.
std::string TunerSummary(const std::vector<ReportRow>& rows);

}  // namespace pstrain::compare
