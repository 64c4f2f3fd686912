// The elastic all-reduce: variable_update allreduce over collective gloo
// with data.sharding dynamic (docs/ELASTIC.md). Workers come and go at step
// boundaries without a restart, as with Horovod Elastic: the group re-forms
// (worker/elastic/elastic_group.h), a joining worker takes the variables,
// optimizer slots, step and data position of a member, and the group's
// ledger (worker/elastic/group_ledger.h) trains every example once.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "worker/strategy.h"

namespace pstrain {

// Whether `config`'s all-reduce is the elastic one.
bool IsElasticAllReduce(const ExperimentConfig& config);

absl::StatusOr<std::unique_ptr<Strategy>> CreateElasticAllReduce(const StrategyContext& context);

}  // namespace pstrain
