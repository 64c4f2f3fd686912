// When a run is input-bound: its workers' steps waited for their input batch
// (WorkerReport.input_wait_share, the decode pipeline not keeping up) more
// than this share of the run. The worker's summary line and
// pstrain-compare's table use the same threshold (docs/DATA.md).
#pragma once

namespace pstrain {

inline constexpr double kInputBoundShare = 0.1;

inline bool InputBound(double input_wait_share) { return input_wait_share > kInputBoundShare; }

}  // namespace pstrain
