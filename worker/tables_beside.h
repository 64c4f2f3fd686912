// A strategy without parameter servers, with the run's embedding tables on
// PS shards beside it (StrategyEntry::tables_beside; docs/EMBEDDINGS.md,
// "Dense MLPs on all-reduce beside tables on the PS"): the dense strategy
// does everything it does alone; the tables' session (TableSession) starts
// before it, hears of each finished step, and finishes after it. The
// worker's sparse stage moves the rows (worker/sparse_stage.h), with the
// session's generation.
#pragma once

#include <memory>

#include "worker/strategy.h"
#include "worker/table_session.h"

namespace pstrain {

std::unique_ptr<Strategy> WithTablesBeside(std::unique_ptr<Strategy> dense, std::unique_ptr<TableSession> tables,
                                           const StrategyContext& context);

}  // namespace pstrain
