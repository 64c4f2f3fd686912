#include "worker/table_session.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "glog/logging.h"

namespace pstrain {

absl::StatusOr<std::unique_ptr<TableSession>> TableSession::Create(const ExperimentConfig& config, int worker_index,
                                                                   Transport* transport) {
  if (config.cluster().ps_hosts().empty()) {
    return absl::InvalidArgumentError("embedding tables need parameter servers: cluster.ps_hosts lists none");
  }
  std::unique_ptr<TableSession> session(new TableSession(config, worker_index));
  PSTRAIN_ASSIGN_OR_RETURN(session->client_,
                           PsClient::Create(config, worker_index, transport, &session->no_variables_, {}));
  return session;
}

TableSession::~TableSession() { heartbeats_.reset(); }  // before the client it uses

absl::Status TableSession::Start(int64_t total_steps) {
  const absl::Duration startup = absl::Seconds(config_.timeouts().startup_seconds());
  int64_t min_generation = 1;
  if (worker_ == 0) {
    PSTRAIN_RETURN_IF_ERROR(client_->Init(total_steps, /*restore=*/nullptr, startup));
    min_generation = client_->generation();
    LOG(INFO) << "chief: created the embedding tables on " << client_->num_shards() << " PS shards at generation "
              << min_generation;
  }
  PSTRAIN_RETURN_IF_ERROR(client_->Join(min_generation, startup).status());
  const absl::Duration period = absl::Seconds(config_.timeouts().heartbeat_seconds());
  heartbeats_ = std::make_unique<PeriodicThread>(period, [this] {
    absl::Status s = client_->Heartbeat(step_.load(), finished_pushing_.load()).status();
    if (!s.ok()) LOG(WARNING) << "heartbeat: " << s.message();
  });
  return absl::OkStatus();
}

absl::Status TableSession::Finish(const WorkerReport& mine, const std::function<void()>& before_done,
                                  ClusterReport* report) {
  finished_pushing_ = true;
  PSTRAIN_RETURN_IF_ERROR(client_->Heartbeat(step_.load(), /*finished_pushing=*/true).status());
  if (worker_ == 0) {
    if (before_done) before_done();  // heartbeats still going
    PSTRAIN_ASSIGN_OR_RETURN(const std::vector<StatsResponse> stats, client_->Stats());
    for (const StatsResponse& s : stats) report->ps_load.push_back(s.load());
  }
  if (heartbeats_ != nullptr) heartbeats_->Stop();
  return client_->Done(mine);
}

}  // namespace pstrain
