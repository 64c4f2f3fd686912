// Gathering every worker's report without parameter servers: each worker
// fills its own row of a float table (zeros elsewhere), the strategy sums the
// table across workers with its collective, and the chief reads the rows.
#pragma once

#include <vector>

#include "proto/ps.pb.h"
#include "worker/strategy.h"

namespace pstrain {

// A table of `num_workers` rows with `mine` in row mine.worker().
std::vector<float> ReportTable(const WorkerReport& mine, int num_workers);
// The reports of a summed table: `mine` first, then the other rows in
// worker order (steps taken from `mine`: every worker ran the same number).
ClusterReport ReportsFromTable(const WorkerReport& mine, const std::vector<float>& summed, int num_workers);

}  // namespace pstrain
