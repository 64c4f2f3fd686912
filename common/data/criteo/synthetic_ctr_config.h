// The synthetic click-log generator (synthetic_ctr.h) a config describes:
// data.ctr, and the cardinalities of model.tables where data.ctr gives
// none. The source synthetic_ctr generates from it; tests write the same
// examples to files.
#pragma once

#include "common/data/criteo/synthetic_ctr.h"
#include "proto/config.pb.h"

namespace pstrain::criteo {

// The options of `config`'s generator (unchecked: the source's config
// check refuses what SyntheticCtr::Create would).
SyntheticCtrOptions SyntheticCtrOptionsOf(const ExperimentConfig& config);

}  // namespace pstrain::criteo
