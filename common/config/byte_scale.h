// Byte scale of emulated runs (docs/EMULATION.md, "Byte scale"): how to run
// an emulated experiment b times sooner at the same load on this machine.
//
// With byte scale b every dense variable holds 1/b of the model's elements,
// links and in-host copies run b times slower still, and the layout's byte
// sizes are divided by b: each transfer takes its modelled time while the
// machine moves b times fewer bytes. It is a way of running an experiment,
// not part of it (as pstrain-bench's --seconds): pstrain-launch,
// pstrain-compare and the roles take it as --byte_scale, and result.json
// records it beside the time scale.
#pragma once

#include "absl/status/status.h"
#include "proto/config.pb.h"

namespace pstrain {

// Whether `byte_scale` is one a run may take: in [1, 1000].
bool ByteScaleInRange(double byte_scale);

// OK, or INVALID_ARGUMENT naming --byte_scale: in range (ByteScaleInRange),
// and other than 1 only with device emulated and no model.tables
// (embedding tables are not scaled).
absl::Status CheckByteScale(const ExperimentConfig& config, double byte_scale);

// The byte scale `config` runs at: `byte_scale` with device emulated, 1
// otherwise (TimeDilation's rule).
double ByteScale(const ExperimentConfig& config, double byte_scale);

// How much slower than modelled a link or an in-host copy runs: the time
// dilation (common/config/time_dilation.h) times the byte scale.
double LinkDilation(const ExperimentConfig& config, double byte_scale);

}  // namespace pstrain
