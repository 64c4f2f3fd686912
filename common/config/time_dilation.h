// Time dilation of emulated runs (docs/EMULATION.md): the one rule for how
// much slower than modelled an emulated cluster runs.
#pragma once

#include <algorithm>

#include "proto/config.pb.h"

namespace pstrain {

// k >= 1: emulation.time_scale with device emulated (modelled compute x k,
// links / k, deadlines x k, reported rates x k); 1 otherwise, since real
// compute cannot be slowed down (config validation refuses a time_scale
// other than 1 there).
inline double TimeDilation(const ExperimentConfig& config) {
  return config.device() == "emulated" ? std::max(1.0, config.emulation().time_scale()) : 1.0;
}

}  // namespace pstrain
