// PsMetrics: a PS shard's load as Prometheus metrics (common/telemetry/),
// labelled {shard="<i>"}: counters pstrain_ps_received_bytes_total,
// pstrain_ps_sent_bytes_total, pstrain_ps_applied_updates_total,
// pstrain_ps_apply_seconds_total, pstrain_ps_dropped_gradients_total,
// pstrain_ps_ssp_blocked_pulls_total, pstrain_ps_ssp_wait_seconds_total,
// pstrain_ps_membership_changes_total; gauges pstrain_ps_variables,
// pstrain_ps_variable_bytes, pstrain_ps_workers_done, pstrain_ps_workers_lost,
// pstrain_ps_workers_present, pstrain_ps_stragglers (workers named slower
// than their peers now). Per embedding table, labelled {shard, table}:
// gauges pstrain_ps_table_rows, pstrain_ps_table_bytes; counters
// pstrain_ps_table_evicted_rows_total, pstrain_ps_table_pulled_rows_total,
// pstrain_ps_table_pushed_rows_total.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/telemetry/metric_registry.h"
#include "proto/ps.pb.h"

namespace pstrain {

class PsMetrics {
 public:
  // `tables`: the run's embedding tables, in config order (as Stats lists
  // them).
  static absl::StatusOr<std::unique_ptr<PsMetrics>> Register(MetricRegistry* registry, int shard,
                                                             const std::vector<std::string>& tables = {});
  // Brings every metric up to `stats` (the shard's Stats(); counters advance
  // by what changed since the last call).
  void Update(const StatsResponse& stats);

 private:
  PsMetrics() = default;
  Counter* received_ = nullptr;
  Counter* sent_ = nullptr;
  Counter* applied_ = nullptr;
  Counter* apply_seconds_ = nullptr;
  Counter* dropped_ = nullptr;
  Counter* ssp_blocked_ = nullptr;
  Counter* ssp_wait_ = nullptr;
  Gauge* variables_ = nullptr;
  Gauge* variable_bytes_ = nullptr;
  Gauge* workers_done_ = nullptr;
  Gauge* workers_lost_ = nullptr;
  Gauge* workers_present_ = nullptr;
  Counter* membership_changes_ = nullptr;
  Gauge* stragglers_ = nullptr;
  // One per embedding table, in config order.
  struct TableMetrics {
    Gauge* rows = nullptr;
    Gauge* bytes = nullptr;
    Counter* evicted = nullptr;
    Counter* pulled = nullptr;
    Counter* pushed = nullptr;
  };
  std::vector<TableMetrics> tables_;
  // Registers `table`'s metrics.
  static absl::StatusOr<TableMetrics> RegisterTable(MetricRegistry* registry, int shard, const std::string& table);
};

}  // namespace pstrain
