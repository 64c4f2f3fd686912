// How much memory this process has held: its peak resident set (getrusage
// ru_maxrss), the figure the model benchmark and every worker's report give
// for CPU memory. GPU memory is the device contexts' business
// (DeviceContext::PeakDeviceBytes).
#pragma once

#include <cstdint>

namespace pstrain {

// The most bytes of physical memory this process has held at once, since it
// started; 0 where getrusage fails.
int64_t PeakRssBytes();

// `bytes` in GiB (2^30 bytes), for reports.
inline double ToGib(int64_t bytes) { return static_cast<double>(bytes) / (int64_t{1} << 30); }

}  // namespace pstrain
