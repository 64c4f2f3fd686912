#include "ps/ps_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pstrain {

absl::StatusOr<PsMetrics::TableMetrics> PsMetrics::RegisterTable(MetricRegistry* registry, int shard,
                                                                 const std::string& table) {
  const MetricLabels labels = {{"shard", absl::StrCat(shard)}, {"table", table}};
  TableMetrics m;
  PSTRAIN_ASSIGN_OR_RETURN(
      m.rows, registry->RegisterGauge("pstrain_ps_table_rows", "Rows of the embedding table on this shard.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m.bytes, registry->RegisterGauge("pstrain_ps_table_bytes",
                                       "Bytes of the table on this shard (rows, optimizer slots, index).", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m.evicted, registry->RegisterCounter("pstrain_ps_table_evicted_rows_total",
                                                                "Rows dropped to stay within max_rows.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(
      m.pulled, registry->RegisterCounter("pstrain_ps_table_pulled_rows_total", "Rows answered to pulls.", labels));
  PSTRAIN_ASSIGN_OR_RETURN(m.pushed,
                           registry->RegisterCounter("pstrain_ps_table_pushed_rows_total", "Rows updated.", labels));
  return m;
}

absl::StatusOr<std::unique_ptr<PsMetrics>> PsMetrics::Register(MetricRegistry* registry, int shard,
                                                               const std::vector<std::string>& tables) {
  auto m = std::unique_ptr<PsMetrics>(new PsMetrics());
  const MetricLabels labels = {{"shard", absl::StrCat(shard)}};
  auto counter = [&](Counter** c, const char* name, const char* help) -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(*c, registry->RegisterCounter(name, help, labels));
    return absl::OkStatus();
  };
  auto gauge = [&](Gauge** g, const char* name, const char* help) -> absl::Status {
    PSTRAIN_ASSIGN_OR_RETURN(*g, registry->RegisterGauge(name, help, labels));
    return absl::OkStatus();
  };
  PSTRAIN_RETURN_IF_ERROR(
      counter(&m->received_, "pstrain_ps_received_bytes_total", "Payload bytes received (pushes, init)."));
  PSTRAIN_RETURN_IF_ERROR(counter(&m->sent_, "pstrain_ps_sent_bytes_total", "Payload bytes sent (pulls)."));
  PSTRAIN_RETURN_IF_ERROR(counter(&m->applied_, "pstrain_ps_applied_updates_total", "Optimizer updates applied."));
  PSTRAIN_RETURN_IF_ERROR(
      counter(&m->apply_seconds_, "pstrain_ps_apply_seconds_total", "Seconds spent applying gradients."));
  PSTRAIN_RETURN_IF_ERROR(
      counter(&m->dropped_, "pstrain_ps_dropped_gradients_total", "Gradients dropped as stale (sync backups)."));
  PSTRAIN_RETURN_IF_ERROR(
      counter(&m->ssp_blocked_, "pstrain_ps_ssp_blocked_pulls_total", "ssp: pulls that waited for a slower worker."));
  PSTRAIN_RETURN_IF_ERROR(
      counter(&m->ssp_wait_, "pstrain_ps_ssp_wait_seconds_total", "ssp: seconds pulls waited for slower workers."));
  PSTRAIN_RETURN_IF_ERROR(gauge(&m->variables_, "pstrain_ps_variables", "Variables (or parts) on this shard."));
  PSTRAIN_RETURN_IF_ERROR(
      gauge(&m->variable_bytes_, "pstrain_ps_variable_bytes", "Bytes of the variables on this shard."));
  PSTRAIN_RETURN_IF_ERROR(gauge(&m->workers_done_, "pstrain_ps_workers_done", "Workers that said Done."));
  PSTRAIN_RETURN_IF_ERROR(gauge(&m->workers_lost_, "pstrain_ps_workers_lost", "Workers declared lost."));
  PSTRAIN_RETURN_IF_ERROR(gauge(&m->workers_present_, "pstrain_ps_workers_present",
                                "Workers heard from and neither done, lost nor absent."));
  PSTRAIN_RETURN_IF_ERROR(counter(&m->membership_changes_, "pstrain_ps_membership_changes_total",
                                  "Workers that joined, rejoined or were lost."));
  PSTRAIN_RETURN_IF_ERROR(gauge(&m->stragglers_, "pstrain_ps_stragglers",
                                "Workers named slower than their peers now (busy time per step, 1.3x or more)."));
  for (const std::string& table : tables) {
    PSTRAIN_ASSIGN_OR_RETURN(TableMetrics t, RegisterTable(registry, shard, table));
    m->tables_.push_back(t);
  }
  return m;
}

void PsMetrics::Update(const StatsResponse& stats) {
  const ShardLoad& load = stats.load();
  received_->AdvanceTo(static_cast<double>(load.bytes_in()));
  sent_->AdvanceTo(static_cast<double>(load.bytes_out()));
  applied_->AdvanceTo(static_cast<double>(load.applied_updates()));
  apply_seconds_->AdvanceTo(load.apply_seconds());
  dropped_->AdvanceTo(static_cast<double>(load.dropped_gradients()));
  ssp_blocked_->AdvanceTo(static_cast<double>(load.ssp_blocked_pulls()));
  ssp_wait_->AdvanceTo(load.ssp_wait_seconds());
  variables_->Set(static_cast<double>(load.variables()));
  variable_bytes_->Set(static_cast<double>(load.variable_bytes()));
  workers_done_->Set(stats.done_size());
  workers_lost_->Set(stats.lost_size());
  workers_present_->Set(stats.present_size());
  membership_changes_->AdvanceTo(stats.membership_size());
  stragglers_->Set(static_cast<double>(std::count_if(stats.stragglers().begin(), stats.stragglers().end(),
                                                     [](const Straggler& s) { return s.current(); })));
  // Before the chief's Init the shard lists no tables.
  for (int i = 0; i < stats.tables_size() && i < static_cast<int>(tables_.size()); ++i) {
    const TableStats& t = stats.tables(i);
    tables_[i].rows->Set(static_cast<double>(t.rows()));
    tables_[i].bytes->Set(static_cast<double>(t.bytes()));
    tables_[i].evicted->AdvanceTo(static_cast<double>(t.evicted_rows()));
    tables_[i].pulled->AdvanceTo(static_cast<double>(t.pulled_rows()));
    tables_[i].pushed->AdvanceTo(static_cast<double>(t.pushed_rows()));
  }
}

}  // namespace pstrain
